#include "store/doctor.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "io/checksum.h"
#include "io/probe.h"
#include "model/config.h"
#include "store/fs_util.h"
#include "store/manifest.h"
#include "store/spine_pack.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

uint64_t meminfo_kb(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string k;
  uint64_t v = 0;
  std::string unit;
  while (in >> k >> v >> unit)
    if (k == key + ":") return v;
  return 0;
}

DoctorRow cpu_row() {
  std::string have;
  bool avx2 = false;
#if defined(__x86_64__)
  __builtin_cpu_init();
  avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  for (auto [name, ok] : {std::pair{"sse4.2", __builtin_cpu_supports("sse4.2")}, {"avx2", __builtin_cpu_supports("avx2")},
                          {"fma", __builtin_cpu_supports("fma")}, {"f16c", __builtin_cpu_supports("f16c")},
                          {"avx512f", __builtin_cpu_supports("avx512f")}, {"avx512bw", __builtin_cpu_supports("avx512bw")}})
    if (ok) have += std::string(have.empty() ? "" : " ") + name;
#else
  avx2 = true;
  have = "non-x86 (Highway picks the best target at run time)";
#endif
  return {"host: CPU features", avx2 ? Verdict::Pass : Verdict::Warn,
          have.empty() ? "none of sse4.2/avx2/fma/avx512 (kernels use the scalar path)" : have};
}

// Reads every copy of every expert and compares it with the manifest.
void verify_all(const Manifest& m, std::vector<DoctorRow>& rows) {
  std::vector<uint8_t> buf(m.span_bytes);
  for (size_t d = 0; d < m.drives.size(); ++d) {
    uint64_t ok = 0, bad = 0;
    std::string first_bad;
    std::map<int, int> fds;
    for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
      for (int e = 0; e < m.num_experts; ++e) {
        const ExpertEntry& x = m.experts[mi * m.num_experts + e];
        for (const auto& p : x.at) {
          if (p.drive != int(d)) continue;
          const std::string path = (fs::path(m.pack_dir(int(d))) / m.drives[d].packs[p.file].name).string();
          if (!fds.count(p.file)) fds[p.file] = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
          const int fd = fds[p.file];
          std::string why;
          if (fd < 0) {
            why = "cannot open";
          } else {
            ssize_t n = ::pread(fd, buf.data(), m.expert_bytes, off_t(p.offset));
            if (n != ssize_t(m.expert_bytes)) why = "short read";
            else if (!(xxh3_128({buf.data(), m.expert_bytes}) == x.xxh3)) why = "checksum mismatch";
          }
          if (why.empty()) {
            ok++;
          } else {
            if (bad++ == 0)
              first_bad = fmt::format("layer {} expert {}: {} at offset {} of {}", m.moe_layers[mi], e, why, p.offset, path);
          }
        }
      }
    for (auto& [f, fd] : fds)
      if (fd >= 0) ::close(fd);
    rows.push_back({fmt::format("store: drive {} expert checksums", d), bad ? Verdict::Fail : Verdict::Pass,
                    bad ? fmt::format("{} of {} spans bad; first: {}", bad, ok + bad, first_bad)
                        : fmt::format("{} spans match the manifest", ok)});
  }
}

}  // namespace

std::vector<DoctorRow> run_doctor(const std::string& store, bool full) {
  std::vector<DoctorRow> rows;
  rows.push_back(cpu_row());
  const bool uring = io::io_uring_available();
  rows.push_back({"host: io_uring", uring ? Verdict::Pass : Verdict::Warn,
                  uring ? "available" : "unavailable (reads use the pread thread pool)"});
  const uint64_t avail = meminfo_kb("MemAvailable") * 1024, total = meminfo_kb("MemTotal") * 1024;
  if (store.empty()) {
    rows.push_back({"host: memory", Verdict::Pass, fmt::format("{:.1f} GB available of {:.1f} GB", avail / 1e9, total / 1e9)});
    return rows;
  }
  auto man_or = Manifest::load(store);
  if (!man_or.ok()) {
    rows.push_back({"store: manifest", Verdict::Fail, man_or.message()});
    return rows;
  }
  const Manifest& m = *man_or;
  uint64_t copies = 0;
  for (const auto& x : m.experts) copies += x.at.size();
  rows.push_back({"store: manifest", Verdict::Pass,
                  fmt::format("version {}, {} MoE layers x {} experts, {} replicas, {} drives, placements consistent", m.version,
                              m.moe_layers.size(), m.num_experts, copies - m.experts.size(), m.drives.size())});

  // Spine: files present with the right size (and checksum with --full).
  const std::string spine_dir = (fs::path(store) / kSpineDirName).string();
  uint64_t spine_bytes = 0;
  std::string spine_bad;
  for (const auto& f : m.spine_files) {
    const std::string path = (fs::path(spine_dir) / f.name).string();
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) spine_bad += fmt::format("{}: missing; ", path);
    else if (size != f.size) spine_bad += fmt::format("{}: {} bytes, manifest says {}; ", path, size, f.size);
    else if (full) {
      auto h = xxh3_128_file(path);
      if (!h.ok() || !(*h == f.xxh3)) spine_bad += fmt::format("{}: checksum mismatch; ", path);
    }
    if (f.name.ends_with(".safetensors")) spine_bytes += f.size;
  }
  rows.push_back({full ? "store: spine files (size + checksum)" : "store: spine files (size)",
                  spine_bad.empty() ? Verdict::Pass : Verdict::Fail,
                  spine_bad.empty() ? fmt::format("{} files, {:.1f} MB of tensors", m.spine_files.size(), spine_bytes / 1e6) : spine_bad});

  // The spine's precision: row-int8 is an explicit, lossy choice and says so.
  rows.push_back({"store: spine precision", m.spine_dtype == "int8" ? Verdict::Warn : Verdict::Pass,
                  m.spine_dtype == "int8"
                      ? fmt::format("{}: matrices quantized per row (spec §4.3), logits are not those of the checkpoint",
                                    spine_label(m.spine_dtype))
                      : spine_label(m.spine_dtype)});

  // Resident plan: the spine plus one layer's worth of expert buffers.
  const uint64_t arena = std::min<uint64_t>(uint64_t(m.num_experts) * m.span_bytes, 8ull << 30);
  const uint64_t resident = spine_bytes + arena;
  rows.push_back({"host: memory vs resident plan",
                  resident > total ? Verdict::Fail : resident > avail ? Verdict::Warn : Verdict::Pass,
                  fmt::format("resident {:.2f} GB (spine {:.2f} + expert buffers {:.2f}); {:.1f} GB available of {:.1f} GB",
                              resident / 1e9, spine_bytes / 1e9, arena / 1e9, avail / 1e9, total / 1e9)});

  // Drives: root, O_DIRECT, pack files.
  std::vector<std::vector<bool>> file_ok(m.drives.size());
  for (size_t d = 0; d < m.drives.size(); ++d) {
    const auto& dr = m.drives[d];
    if (!fs::is_directory(dr.root)) {
      rows.push_back({fmt::format("store: drive {} root", d), Verdict::Fail, dr.root + ": missing"});
      file_ok[d].assign(dr.packs.size(), false);
      continue;
    }
    // Read-only: test O_DIRECT on an existing pack instead of creating a file.
    std::string direct = "no pack file to test";
    Verdict dv = Verdict::Warn;
    for (const auto& p : dr.packs) {
      int fd = ::open((fs::path(m.pack_dir(int(d))) / p.name).c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      if (fd >= 0) {
        ::close(fd);
        direct = "O_DIRECT supported", dv = Verdict::Pass;
        break;
      }
      if (errno == EINVAL) {
        direct = "O_DIRECT refused by the filesystem (buffered reads)";
        break;
      }
    }
    rows.push_back({fmt::format("store: drive {} root", d), dv, fmt::format("{}: {}", dr.root, direct)});
    std::string bad;
    uint64_t bytes = 0;
    for (const auto& p : dr.packs) {
      const std::string path = (fs::path(m.pack_dir(int(d))) / p.name).string();
      std::error_code ec;
      const uint64_t size = fs::file_size(path, ec);
      const bool ok = !ec && size == p.size;
      file_ok[d].push_back(ok);
      if (ec) bad += fmt::format("{}: missing; ", path);
      else if (!ok) bad += fmt::format("{}: {} bytes, manifest says {} (truncated?); ", path, size, p.size);
      bytes += p.size;
    }
    rows.push_back({fmt::format("store: drive {} pack files", d), bad.empty() ? Verdict::Pass : Verdict::Fail,
                    bad.empty() ? fmt::format("{} files, {:.1f} MB, sizes match", dr.packs.size(), bytes / 1e6) : bad});
  }
  // Coverage: every expert still has a copy in a healthy file.
  uint64_t lost = 0, degraded = 0;
  std::string first_lost;
  for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
    for (int e = 0; e < m.num_experts; ++e) {
      const auto& x = m.experts[mi * m.num_experts + e];
      int good = 0;
      for (const auto& p : x.at) good += file_ok[p.drive][p.file] ? 1 : 0;
      if (good == 0 && lost++ == 0) first_lost = fmt::format("layer {} expert {}", m.moe_layers[mi], e);
      if (good > 0 && good < int(x.at.size())) degraded++;
    }
  rows.push_back({"store: expert coverage", lost ? Verdict::Fail : degraded ? Verdict::Warn : Verdict::Pass,
                  lost ? fmt::format("{} experts have no healthy copy (first: {})", lost, first_lost)
                  : degraded ? fmt::format("every expert readable; {} run on their last copy", degraded)
                             : "every copy of every expert is present"});
  if (full) verify_all(m, rows);
  return rows;
}

std::string format_doctor_table(const std::vector<DoctorRow>& rows) {
  size_t w = 5;
  for (const auto& r : rows) w = std::max(w, r.check.size());
  std::string out = fmt::format("{:<{}}  {:<7} {}\n", "CHECK", w, "VERDICT", "DETAIL");
  for (const auto& r : rows)
    out += fmt::format("{:<{}}  {:<7} {}\n", r.check, w,
                       r.verdict == Verdict::Pass ? "PASS" : r.verdict == Verdict::Warn ? "WARN" : "FAIL", r.detail);
  return out;
}

}  // namespace deltafin
