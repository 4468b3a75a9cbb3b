#include "core/memory_limit.h"

#include <algorithm>
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace deltafin {
namespace {

namespace fs = std::filesystem;

// The first number in the file (v2 writes "max" for no limit: nullopt).
std::optional<uint64_t> read_number(const fs::path& p) {
  std::ifstream f(p);
  std::string word;
  if (!(f >> word) || word == "max") return std::nullopt;
  try {
    size_t used = 0;
    const unsigned long long v = std::stoull(word, &used);
    if (used != word.size()) return std::nullopt;
    return uint64_t(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// `key`'s value in a memory.stat file ("key value" lines), 0 if absent.
uint64_t stat_value(const fs::path& p, const std::string& key) {
  std::ifstream f(p);
  std::string name;
  uint64_t v = 0;
  while (f >> name >> v)
    if (name == key) return v;
  return 0;
}

struct CgroupUse {
  uint64_t limit = 0, used = 0;
};

// The tightest limit from `dir` up to `top`; usage is the limiting cgroup's,
// less its inactive file pages (the page cache it could drop at once, as
// MemAvailable counts them).
std::optional<CgroupUse> tightest(fs::path dir, const fs::path& top, bool v2) {
  std::optional<CgroupUse> best;
  const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
  const char* usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
  const char* inactive = v2 ? "inactive_file" : "total_inactive_file";
  for (;;) {
    if (auto lim = read_number(dir / limit_file); lim && (!best || *lim < best->limit)) {
      const uint64_t use = read_number(dir / usage_file).value_or(0);
      const uint64_t idle = stat_value(dir / "memory.stat", inactive);
      best = CgroupUse{*lim, use > idle ? use - idle : 0};
    }
    // Stop at `top`, or wherever the walk would leave it (a path that is
    // not below `top`, or the filesystem root).
    if (dir == top || dir.native().size() <= top.native().size()) break;
    dir = dir.parent_path();
  }
  return best;
}

}  // namespace

Result<MemoryLimit> memory_limit(const std::string& proc, const std::string& root) {
  std::ifstream mi(proc + "/meminfo");
  if (!mi) return error("{}/meminfo: cannot open", proc);
  MemoryLimit m;
  bool have_avail = false, have_total = false;
  std::string line;
  while (std::getline(mi, line)) {
    std::istringstream is(line);
    std::string name;
    uint64_t kb = 0;
    is >> name >> kb;
    if (name == "MemAvailable:") m.available = kb << 10, have_avail = true;
    if (name == "MemTotal:") m.total = kb << 10, have_total = true;
  }
  if (!have_avail || !have_total) return error("{}/meminfo: no MemAvailable/MemTotal line", proc);
  // /proc/self/cgroup: "0::/path" (v2) or "N:memory:/path" (v1, possibly among other controllers).
  std::ifstream cg(proc + "/self/cgroup");
  std::optional<CgroupUse> use;
  while (std::getline(cg, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    bool v1_memory = false;
    std::istringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');) v1_memory = v1_memory || c == "memory";
    const bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    if (!v1_memory && !v2) continue;
    const fs::path top = v2 ? fs::path(root) : fs::path(root) / "memory";
    const fs::path rel = fs::path(path).relative_path();
    std::optional<CgroupUse> u = tightest(rel.empty() ? top : top / rel, top, v2);
    if (u && (!use || u->limit < use->limit)) use = u;
  }
  if (use) {
    const uint64_t left = use->limit > use->used ? use->limit - use->used : 0;
    if (left < m.available) {
      m.available = left;
      m.cgroup_binds = true;
      m.cgroup_limit = use->limit;
      m.cgroup_used = use->used;
    }
    m.total = std::min(m.total, use->limit);
  }
  return m;
}

std::string describe(const MemoryLimit& m) {
  std::string s = fmt::format("{:.1f} GB available of {:.1f} GB", m.available / 1e9, m.total / 1e9);
  if (m.cgroup_binds)
    s += fmt::format(" (memory cgroup: limit {:.1f} GB, used {:.1f} GB)", m.cgroup_limit / 1e9, m.cgroup_used / 1e9);
  return s;
}

}  // namespace deltafin
