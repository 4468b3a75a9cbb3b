#include "hub/disk_plan.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace deltafin::hub {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSpan = 4096;

void say(const SetupOptions& o, const std::string& line) {
  if (!o.prepare.quiet) std::fprintf(stderr, "setup: %s\n", line.c_str());
}

std::string gb(uint64_t b) { return fmt::format("{:.2f} GB", double(b) / 1e9); }

struct Device {
  dev_t dev = 0;
  std::string path;   // a directory on it, for statvfs
  std::string label;  // what is stored there
  uint64_t need = 0;
};

Status check_space(const SetupOptions& o, std::vector<Device> devices) {
  // Merge what shares one file system.
  std::vector<Device> merged;
  for (auto& d : devices) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const Device& m) { return m.dev == d.dev; });
    if (it == merged.end()) {
      merged.push_back(d);
    } else {
      it->need += d.need;
      it->label += " + " + d.label;
    }
  }
  std::string missing;
  for (const auto& d : merged) {
    struct statvfs sv {};
    if (::statvfs(d.path.c_str(), &sv) != 0) return error("{}: cannot read free space: {}", d.path, std::strerror(errno));
    const uint64_t free_bytes = uint64_t(sv.f_bavail) * uint64_t(sv.f_frsize);
    const uint64_t want = d.need + d.need / 100 + (64ull << 20);  // 1% and 64 MiB of slack
    say(o, fmt::format("disk {}: {} needed ({}), {} free{}", d.path, gb(want), d.label, gb(free_bytes),
                       want > free_bytes ? "  NOT ENOUGH" : ""));
    if (want > free_bytes)
      missing += fmt::format("{}{} needs {} ({}) but has {} free", missing.empty() ? "" : "; ", d.path, gb(want),
                             d.label, gb(free_bytes));
  }
  if (!missing.empty())
    return error("not enough disk space: {} (nothing was downloaded; free space or choose other --out/--drive "
                 "directories; --no-space-check skips this check)",
                 missing);
  return {};
}

dev_t device_of(const std::string& path) {
  struct stat st {};
  fs::path p = path;
  while (::stat(p.c_str(), &st) != 0 && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  return st.st_dev;
}

std::string existing_dir(const std::string& path) {
  fs::path p = path;
  std::error_code ec;
  while (!fs::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  return p.string();
}

}  // namespace

// Needs per file system: the store's spine and the download on --out's, the
// expert packs split over the drives by their given rates (equal otherwise),
// with the replicas prepare will add.
Status plan_space(const SetupOptions& o, const CheckpointSizes& sz, uint64_t to_download) {
  DF_ASSIGN(auto drives, parse_drive_args(o.prepare.drives));
  std::vector<Device> devices;
  const std::string out = existing_dir(fs::absolute(o.prepare.out_dir).string());
  devices.push_back({device_of(out), out,
                     to_download ? fmt::format("spine and download of {}", gb(to_download)) : "spine",
                     (sz.tensors - sz.expert_bytes) + (sz.total - sz.tensors) + to_download});
  const uint64_t per_expert = sz.experts ? sz.expert_bytes / sz.experts : 0;
  const uint64_t span = (per_expert + kSpan - 1) / kSpan * kSpan;
  uint64_t copies = sz.experts;
  if (o.prepare.replicate_hot == "all") {
    copies *= 2;
  } else if (!o.prepare.replicate_hot.empty()) {
    try {
      copies += std::min<uint64_t>(std::stoull(o.prepare.replicate_hot), sz.experts);
    } catch (const std::exception&) {
      // prepare names the bad value
    }
  }
  double rate_sum = 0;
  bool all_given = true;
  for (const auto& [root, rate] : drives) rate_sum += rate, all_given = all_given && rate > 0;
  for (size_t d = 0; d < drives.size(); ++d) {
    const double share = all_given ? drives[d].second / rate_sum : 1.0 / double(drives.size());
    // A drive holds whole spans: round its share up by one span.
    const uint64_t bytes = uint64_t(double(copies) * share + 1) * span;
    devices.push_back({device_of(drives[d].first), drives[d].first, fmt::format("expert packs of drive {}", d), bytes});
  }
  return check_space(o, devices);
}

}  // namespace deltafin::hub
