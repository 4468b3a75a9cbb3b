// How much memory this process may still use: the machine's MemAvailable, and
// the limit of the memory cgroup it runs in (a container, a systemd slice, a
// benchmark's `memory.limit_in_bytes`), whichever is smaller. A RAM tier sized
// from MemAvailable alone inside a 16 GB container would be killed by the OOM
// killer, not refused.
#pragma once
#include <cstdint>
#include <string>

#include "core/result.h"

namespace deltafin {

struct MemoryLimit {
  uint64_t available = 0;  // bytes this process may still take
  uint64_t total = 0;      // the memory it may use at most (MemTotal, or the cgroup's limit if lower)
  bool cgroup_binds = false;  // the cgroup, not the machine, set `available`
  uint64_t cgroup_limit = 0, cgroup_used = 0;  // when it binds: its limit, and its use less reclaimable file pages
};

// From /proc/meminfo, /proc/self/cgroup and the cgroup filesystem under
// `root` (cgroup v2: unified at root; v1: root/memory). The tightest limit
// on the path from the process's cgroup up to the root applies. A cgroup
// file that cannot be read is no limit; /proc/meminfo must be readable.
Result<MemoryLimit> memory_limit(const std::string& proc = "/proc", const std::string& root = "/sys/fs/cgroup");

// "A GB available of T GB", with the cgroup's limit and use when it binds
// (doctor's memory rows).
std::string describe(const MemoryLimit& m);

}  // namespace deltafin
