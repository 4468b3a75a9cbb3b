// A drive model measured on a real directory with the read-rate probe
// (io::probe_directory, as prepare uses): bandwidth from 4 MiB reads at the
// model's default queue depth; latency from 4 KiB reads at queue depth 1,
// less their transfer time at that bandwidth; the per-request rate from
// 4 MiB reads at queue depth 1, less the latency (0 when a lone request
// reaches the bandwidth).
#pragma once
#include <cstdint>
#include <string>

#include "core/result.h"
#include "sim/drive_sim.h"

namespace deltafin::sim {

struct ProbeSettings {
  uint64_t file_bytes = 64 << 20;  // probe file written (and removed) per measurement
  double seconds = 0.5;            // per measurement, at most
};

Result<DriveModel> probe_drive_model(const std::string& dir, const ProbeSettings& s = {});

// One model per drive of a store, measured on the store's own expert packs
// (nothing written, so no freshly written file can be served from a cache):
// bandwidth from random span-sized reads at the default queue depth, latency
// from random 4 KiB reads at queue depth 1, the per-request rate from random
// span-sized reads at queue depth 1. The yardstick for validating the
// simulator against a measured `run --store` of the same store.
Result<std::vector<DriveModel>> probe_store_drive_models(const std::string& store, const ProbeSettings& s = {});

}  // namespace deltafin::sim
