#include "store/doctor.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/memory_limit.h"
#include "io/checksum.h"
#include "io/probe.h"
#include "model/config.h"
#include "store/fetched_log.h"
#include "store/fs_util.h"
#include "store/heat_file.h"
#include "store/manifest.h"
#include "store/manifest_check.h"
#include "store/spine_pack.h"
#include "store/spine_verify.h"
#include "checkpoint/safetensors.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

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

// Reads every copy of every expert in a file of the right size and compares
// it with the manifest.
void verify_all(const Manifest& m, const std::vector<std::vector<bool>>& file_ok, std::vector<DoctorRow>& rows) {
  std::vector<uint8_t> buf(m.span_bytes);
  std::vector<int> bad_copies(m.experts.size(), 0);
  for (size_t d = 0; d < m.drives.size(); ++d) {
    uint64_t ok = 0, bad = 0, skipped = 0, not_local = 0;
    std::string first_bad;
    std::map<int, int> fds;
    for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
      for (int e = 0; e < m.num_experts; ++e) {
        const size_t idx = mi * m.num_experts + e;
        const ExpertEntry& x = m.experts[idx];
        if (!x.has_sum) {  // a streamed store's expert not fetched yet
          not_local += x.at.size();
          continue;
        }
        for (size_t k = 0; k < x.at.size(); ++k) {
          const Placement& p = x.at[k];
          if (p.drive != int(d)) continue;
          if (!file_ok[d][p.file]) {  // missing or the wrong size: reported above, not read
            skipped++;
            continue;
          }
          const std::string path = m.pack_path(int(d), size_t(p.file));
          if (!fds.count(p.file)) fds[p.file] = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
          const int fd = fds[p.file];
          std::string why;
          if (fd < 0) {
            why = fmt::format("cannot open {}: {}", path, std::strerror(errno));
          } else {
            const ssize_t n = ::pread(fd, buf.data(), m.expert_bytes, off_t(p.offset));
            if (n < 0) {
              why = fmt::format("read error at offset {} of {}: {}", p.offset, path, std::strerror(errno));
            } else if (n != ssize_t(m.expert_bytes)) {
              why = fmt::format("short read at offset {} of {} ({} of {} bytes)", p.offset, path, n, m.expert_bytes);
            } else {
              const Hash128 h = xxh3_128({buf.data(), m.expert_bytes});
              if (!(h == x.xxh3))
                why = fmt::format("checksum mismatch at offset {} of {} (xxh3-128 {}, manifest experts[{}].xxh3[{}] {})",
                                  p.offset, path, h.hex(), mi, e, x.xxh3.hex());
            }
          }
          if (why.empty()) {
            ok++;
          } else {
            bad_copies[idx]++;
            if (bad++ == 0)
              first_bad = fmt::format("layer {} expert {} (experts[{}].at[{}][{}]): {}", m.moe_layers[mi], e, mi, e, k, why);
          }
        }
      }
    for (auto& [f, fd] : fds)
      if (fd >= 0) ::close(fd);
    std::string detail = bad ? fmt::format("{} of {} spans bad; first: {}", bad, ok + bad, first_bad)
                             : fmt::format("{} spans match the manifest", ok);
    if (skipped) detail += fmt::format(" ({} copies in missing or wrong-size files not read)", skipped);
    if (not_local) detail += fmt::format(" ({} copies not fetched yet in this streamed store)", not_local);
    rows.push_back({fmt::format("store: drive {} expert checksums", d), bad ? Verdict::Fail : Verdict::Pass, detail});
  }
  // An expert whose every copy differs: either all copies are damaged or the
  // manifest's checksum is (one edited or damaged field).
  uint64_t none = 0;
  std::string first;
  for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
    for (int e = 0; e < m.num_experts; ++e) {
      const size_t idx = mi * m.num_experts + e;
      if (m.experts[idx].has_sum && bad_copies[idx] == int(m.experts[idx].at.size()) && none++ == 0)
        first = fmt::format("layer {} expert {}: no copy matches experts[{}].xxh3[{}] in the manifest", m.moe_layers[mi],
                            e, mi, e);
    }
  if (none)
    rows.push_back({"store: expert checksums vs copies", Verdict::Fail,
                    fmt::format("{} experts have no copy matching the manifest (first: {}); with several copies this "
                                "points at the manifest's checksum rather than the data",
                                none, first)});
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

// The spine's headers (every tensor's byte range inside its file) and its
// config.json against the manifest's model fields.
// The advisory heat file: absent is fine (runs write it); one that cannot be
// used is a warning (the RAM tier then starts cold), never a failure.
DoctorRow heat_row(const Manifest& m, const std::string& store) {
  const std::string path = (fs::path(store) / kHeatFileName).string();
  if (!fs::exists(path)) return {"store: heat file", Verdict::Pass, "none yet (each run with this store adds its expert counts)"};
  auto h = load_heat(store, m.store_id, int(m.moe_layers.size()), m.num_experts);
  if (!h.ok()) return {"store: heat file", Verdict::Warn, h.message() + "; the RAM tier starts cold (the next run rewrites it)"};
  // Share of the counts on each layer's top 10 % of experts.
  double top = 0, total = 0;
  const size_t E = size_t(m.num_experts), tenth = std::max<size_t>(1, E / 10);
  for (size_t l = 0; l < m.moe_layers.size(); ++l) {
    std::vector<double> c(h->counts.begin() + long(l * E), h->counts.begin() + long((l + 1) * E));
    std::sort(c.begin(), c.end(), std::greater<>());
    for (size_t i = 0; i < E; ++i) total += c[i], top += i < tenth ? c[i] : 0;
  }
  return {"store: heat file", Verdict::Pass,
          fmt::format("{} runs, {:.0f} expert requests per run; each layer's top 10% of experts took {:.1f}%", h->runs,
                      h->weight > 0 ? total / h->weight : 0.0, total > 0 ? 100 * top / total : 0.0)};
}

DoctorRow spine_layout_row(const Manifest& m, const std::string& store) {
  const std::string spine_dir = (fs::path(store) / kSpineDirName).string();
  const char* name = "store: spine headers + model fields";
  auto ck = Checkpoint::open(spine_dir);
  if (!ck.ok()) return {name, Verdict::Fail, ck.message()};
  std::set<std::string> listed;
  for (const auto& f : m.spine_files) listed.insert(f.name);
  for (const auto& sh : (*ck)->shards())
    if (!listed.count(fs::path(sh->path()).filename().string()))
      return {name, Verdict::Fail, fmt::format("{}: read by the spine's index but not listed in the manifest's spine.files", sh->path())};
  auto cfg = ModelConfig::from_json((*ck)->config());
  const std::string config_path = (fs::path(spine_dir) / "config.json").string();
  if (!cfg.ok()) return {name, Verdict::Fail, fmt::format("{}: {}", config_path, cfg.message())};
  Status st = check_manifest_model(m, *cfg, config_path);
  if (!st.ok()) return {name, Verdict::Fail, st.message()};
  return {name, Verdict::Pass,
          fmt::format("{} shards, {} tensors inside their files; {} layers, {} MoE x {} experts of {} bytes as config.json says",
                      (*ck)->shards().size(), (*ck)->tensor_count(), m.num_layers, m.moe_layers.size(), m.num_experts,
                      m.expert_bytes)};
}

}  // namespace

std::vector<DoctorRow> run_doctor(const std::string& store, bool full) {
  std::vector<DoctorRow> rows;
  rows.push_back(cpu_row());
  const bool uring = io::io_uring_available();
  rows.push_back({"host: io_uring", uring ? Verdict::Pass : Verdict::Warn,
                  uring ? "available" : "unavailable (reads use the pread thread pool)"});
  // The machine's MemAvailable, or the memory cgroup's room where tighter
  // (a container, a systemd slice): what this process may really use.
  Result<MemoryLimit> mem = memory_limit();
  const uint64_t avail = mem.ok() ? mem->available : 0, total = mem.ok() ? mem->total : 0;
  const std::string mem_text = mem.ok() ? describe(*mem) : mem.message();
  if (store.empty()) {
    rows.push_back({"host: memory", mem.ok() ? Verdict::Pass : Verdict::Warn, mem_text});
    return rows;
  }
  auto text = Manifest::read_text(store);
  if (!text.ok()) {
    rows.push_back({"store: manifest", Verdict::Fail, text.message()});
    return rows;
  }
  // The manifest's own checksum first, then its contents on their own, so an
  // edited manifest is reported both as edited and by the field that no longer fits.
  bool sealed = false;
  Status seal = Manifest::check_seal(text->first, text->second, &sealed);
  rows.push_back({"store: manifest checksum", !seal.ok() ? Verdict::Fail : sealed ? Verdict::Pass : Verdict::Warn,
                  !seal.ok() ? seal.message()
                  : sealed   ? "manifest_xxh3 matches the manifest's contents"
                             : kUnsealedManifestWarning});
  auto man_or = Manifest::parse_contents(text->first, text->second);
  if (!man_or.ok()) {
    rows.push_back({"store: manifest", Verdict::Fail, man_or.message()});
    return rows;
  }
  Manifest& m = *man_or;
  if (m.stream) {
    // A streamed store: an expert's checksum is the one recorded when it was
    // fetched; an expert not fetched yet is a hole, and not a fault.
    size_t local = 0, all = m.experts.size();
    auto log = FetchedLog::open(store, int(m.moe_layers.size()), m.num_experts);
    if (!log.ok()) {
      rows.push_back({"store: streamed", Verdict::Fail, log.message()});
      return rows;
    }
    for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
      for (int e = 0; e < m.num_experts; ++e) {
        ExpertEntry& x = m.experts[mi * m.num_experts + e];
        if (auto h = (*log)->lookup(int(mi), e); h && !x.has_sum) x.xxh3 = *h, x.has_sum = true;
        local += x.has_sum;
      }
    rows.push_back({"store: streamed", Verdict::Warn,
                    fmt::format("{} of {} experts local (fetched on first use from {}/{}@{}; checked against the "
                                "xxh3-128 recorded then, not yet against their shards' SHA-256){}; `deltafin setup "
                                "--resume --out {}` completes and verifies the store",
                                local, all, m.stream->endpoint, m.stream->repo, m.stream->commit,
                                (*log)->skipped() ? fmt::format("; {} damaged records ignored", (*log)->skipped()) : "",
                                store)});
  }
  uint64_t copies = 0;
  for (const auto& x : m.experts) copies += x.at.size();
  rows.push_back({"store: manifest", Verdict::Pass,
                  fmt::format("version {}, {} MoE layers x {} experts, {} replicas, {} drives; placements consistent "
                              "(aligned, inside their packs, no overlaps, packs exactly filled)",
                              m.version, m.moe_layers.size(), m.num_experts, copies - m.experts.size(), m.drives.size())});
  rows.push_back(spine_layout_row(m, store));
  rows.push_back(heat_row(m, store));

  // Spine: files present with the right size (and checksum with --full), nothing unlisted.
  const SpineCheck sc = check_spine_files(m, store, full, 1);
  uint64_t spine_bytes = 0;
  for (const auto& f : m.spine_files)
    if (f.name.ends_with(".safetensors")) spine_bytes += f.size;
  rows.push_back({full ? "store: spine files (size + checksum)" : "store: spine files (size)",
                  sc.problems.empty() ? Verdict::Pass : Verdict::Fail,
                  sc.problems.empty() ? fmt::format("{} files, {:.1f} MB of tensors", m.spine_files.size(), spine_bytes / 1e6)
                                      : join(sc.problems)});

  // The spine's precision: row-int8 is an explicit, lossy choice and says so.
  rows.push_back({"store: spine precision", m.spine_dtype == "int8" ? Verdict::Warn : Verdict::Pass,
                  m.spine_dtype == "int8"
                      ? fmt::format("{}: matrices quantized per row, logits are not those of the checkpoint",
                                    spine_label(m.spine_dtype))
                      : spine_label(m.spine_dtype)});

  // Resident plan: the spine plus one layer's worth of expert buffers.
  const uint64_t arena = std::min<uint64_t>(uint64_t(m.num_experts) * m.span_bytes, 8ull << 30);
  const uint64_t resident = spine_bytes + arena;
  rows.push_back({"host: memory vs resident plan",
                  !mem.ok()          ? Verdict::Warn
                  : resident > total ? Verdict::Fail
                  : resident > avail ? Verdict::Warn
                                     : Verdict::Pass,
                  fmt::format("resident {:.2f} GB (spine {:.2f} + expert buffers {:.2f}); {}", resident / 1e9,
                              spine_bytes / 1e9, arena / 1e9, mem_text)});

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
      else if (!ok)
        bad += fmt::format("{}: {} bytes, but drives[{}].packs[{}].size in the manifest says {} ({}); ", path, size, d,
                           file_ok[d].size() - 1, p.size, size < p.size ? "truncated?" : "grown or replaced?");
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
  if (full) verify_all(m, file_ok, rows);
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
