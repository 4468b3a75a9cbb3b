#include "sim/drive_probe.h"

#include <algorithm>
#include <filesystem>

#include "io/probe.h"
#include "store/manifest.h"

namespace deltafin::sim {

Result<DriveModel> probe_drive_model(const std::string& dir, const ProbeSettings& s) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return error("--drive probe:{}: not a directory", dir);
  DriveModel m;
  // Large blocks, so that the bandwidth is not the latency in disguise (the
  // model adds the latency per request itself).
  DF_ASSIGN(io::ProbeResult bw, io::probe_directory(dir, s.file_bytes, 4 << 20, m.queue_depth, s.seconds));
  DF_ASSIGN(io::ProbeResult lat, io::probe_directory(dir, s.file_bytes, 4096, 1, s.seconds));
  if (!(bw.mb_s > 0) || lat.bytes == 0) return error("--drive probe:{}: the probe read nothing", dir);
  m.mb_s = bw.mb_s;
  const double per_read = lat.seconds / (double(lat.bytes) / 4096);
  m.latency_us = std::max(0.0, (per_read - 4096 / (m.mb_s * 1e6)) * 1e6);
  return m;
}

Result<std::vector<DriveModel>> probe_store_drive_models(const std::string& store, const ProbeSettings& s) {
  DF_ASSIGN(Manifest man, Manifest::load(store));
  std::vector<DriveModel> out;
  for (size_t d = 0; d < man.drives.size(); ++d) {
    std::vector<std::string> files;
    for (const auto& p : man.drives[d].packs) files.push_back((std::filesystem::path(man.pack_dir(int(d))) / p.name).string());
    if (files.empty()) return error("{}: drive {} holds no packs to probe", store, d);
    DriveModel m;
    DF_ASSIGN(io::ProbeResult bw, io::probe_files(files, man.span_bytes, m.queue_depth, 64ull << 30, s.seconds, 21 + d));
    DF_ASSIGN(io::ProbeResult lat, io::probe_files(files, 4096, 1, 64ull << 30, std::min(s.seconds, 0.5), 31 + d));
    if (!(bw.mb_s > 0) || lat.bytes == 0) return error("{}: the probe of drive {} read nothing", store, d);
    m.mb_s = bw.mb_s;
    const double per_read = lat.seconds / (double(lat.bytes) / 4096);
    m.latency_us = std::max(0.0, (per_read - 4096 / (m.mb_s * 1e6)) * 1e6);
    out.push_back(m);
  }
  return out;
}

}  // namespace deltafin::sim
