// A drive model measured on a real directory with the read-rate probe
// (io::probe_directory, as prepare uses): bandwidth from 4 MiB reads at queue
// depth 32; latency from 4 KiB reads at queue depth 1, less their transfer
// time at that bandwidth. Queue depth: the engine's default, 32.
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

}  // namespace deltafin::sim
