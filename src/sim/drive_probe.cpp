#include "sim/drive_probe.h"

#include <algorithm>
#include <filesystem>

#include "io/probe.h"

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

}  // namespace deltafin::sim
