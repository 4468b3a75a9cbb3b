#include "sim/drive_probe.h"

#include <algorithm>
#include <filesystem>

#include "io/probe.h"
#include "store/manifest.h"

namespace deltafin::sim {

namespace {

// Bandwidth from the large-block probe; latency from the 4 KiB QD-1 probe,
// less each read's transfer time at that bandwidth; the per-request rate
// from the large blocks read one at a time (`one`, block bytes each), less
// the latency.
Result<DriveModel> model_from_probes(const io::ProbeResult& bw, const io::ProbeResult& lat, const io::ProbeResult& one,
                                     uint64_t block, const std::string& what) {
  if (!(bw.mb_s > 0) || lat.bytes == 0 || one.bytes == 0) return error("{}: the probe read nothing", what);
  DriveModel m;
  m.mb_s = bw.mb_s;
  const double per_read = lat.seconds / (double(lat.bytes) / 4096);
  m.latency_us = std::max(0.0, (per_read - 4096 / (m.mb_s * 1e6)) * 1e6);
  const double per_block = one.seconds / (double(one.bytes) / double(block)) - m.latency_us * 1e-6;
  // A lone request no faster than the drive: then there is no limit to model.
  const double req = per_block > 0 ? double(block) / per_block / 1e6 : 0;
  m.request_mb_s = req > 0 && req < m.mb_s ? req : 0;
  return m;
}

}  // namespace

Result<DriveModel> probe_drive_model(const std::string& dir, const ProbeSettings& s) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return error("--drive probe:{}: not a directory", dir);
  DriveModel m;
  // Large blocks, so that the bandwidth is not the latency in disguise (the
  // model adds the latency per request itself).
  DF_ASSIGN(io::ProbeResult bw, io::probe_directory(dir, s.file_bytes, 4 << 20, m.queue_depth, s.seconds));
  DF_ASSIGN(io::ProbeResult lat, io::probe_directory(dir, s.file_bytes, 4096, 1, s.seconds));
  DF_ASSIGN(io::ProbeResult one, io::probe_directory(dir, s.file_bytes, 4 << 20, 1, s.seconds));
  return model_from_probes(bw, lat, one, 4 << 20, "--drive probe:" + dir);
}

Result<std::vector<DriveModel>> probe_store_drive_models(const std::string& store, const ProbeSettings& s) {
  DF_ASSIGN(Manifest man, Manifest::load(store));
  std::vector<DriveModel> out;
  for (size_t d = 0; d < man.drives.size(); ++d) {
    std::vector<std::string> files;
    for (size_t p = 0; p < man.drives[d].packs.size(); ++p) files.push_back(man.pack_path(int(d), p));
    if (files.empty()) return error("{}: drive {} holds no packs to probe", store, d);
    DF_ASSIGN(io::ProbeResult bw, io::probe_files(files, man.span_bytes, DriveModel{}.queue_depth, 64ull << 30, s.seconds, 21 + d));
    DF_ASSIGN(io::ProbeResult lat, io::probe_files(files, 4096, 1, 64ull << 30, std::min(s.seconds, 0.5), 31 + d));
    DF_ASSIGN(io::ProbeResult one, io::probe_files(files, man.span_bytes, 1, 64ull << 30, s.seconds, 41 + d));
    DF_ASSIGN(DriveModel m, model_from_probes(bw, lat, one, man.span_bytes, fmt::format("{}: drive {}", store, d)));
    out.push_back(m);
  }
  return out;
}

}  // namespace deltafin::sim
