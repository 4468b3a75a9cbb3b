// The memory a process may use: MemAvailable, or its memory cgroup's limit
// less its use where that is tighter (v1 and v2 layouts, limits set on a
// parent, "max"), on fake /proc and cgroup trees; and --ram-experts-gb auto's
// arithmetic from such a limit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/memory_limit.h"
#include "store/ram_tier.h"
#include "test_models.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

constexpr uint64_t GiB = 1ull << 30;

struct FakeSystem {
  fs::path proc, root;
  explicit FakeSystem(const std::string& name, uint64_t avail_kb = 20 * 1024 * 1024, uint64_t total_kb = 24 * 1024 * 1024) {
    const fs::path d = testing::temp_dir(name);
    proc = d / "proc";
    root = d / "cgroup";
    put(proc / "meminfo", "MemTotal:       " + std::to_string(total_kb) + " kB\nMemFree: 1 kB\nMemAvailable:   " +
                              std::to_string(avail_kb) + " kB\n");
  }
  Result<MemoryLimit> read() const { return memory_limit(proc.string(), root.string()); }
};

TEST(MemoryLimit, WithoutACgroupLimitItIsMemAvailable) {
  FakeSystem s("memlimit_none");
  put(s.proc / "self/cgroup", "0::/user.slice\n");
  put(s.root / "user.slice/memory.max", "max\n");
  auto m = s.read();
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->available, 20 * GiB);
  EXPECT_EQ(m->total, 24 * GiB);
  EXPECT_FALSE(m->cgroup_binds);
}

TEST(MemoryLimit, AV2LimitOnAParentBindsLessItsInactiveFilePages) {
  FakeSystem s("memlimit_v2");
  put(s.proc / "self/cgroup", "0::/bench/job\n");
  put(s.root / "bench/job/memory.max", "max\n");
  put(s.root / "bench/job/memory.current", "123\n");
  put(s.root / "bench/memory.max", std::to_string(10 * GiB) + "\n");
  put(s.root / "bench/memory.current", std::to_string(3 * GiB) + "\n");
  put(s.root / "bench/memory.stat", "anon 1\nfile 5\ninactive_file " + std::to_string(1 * GiB) + "\n");
  auto m = s.read();
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->cgroup_binds);
  EXPECT_EQ(m->cgroup_limit, 10 * GiB);
  EXPECT_EQ(m->cgroup_used, 2 * GiB);  // 3 GiB used, 1 GiB of it droppable page cache
  EXPECT_EQ(m->available, 8 * GiB);
  EXPECT_EQ(m->total, 10 * GiB);
}

TEST(MemoryLimit, AV1MemoryControllerAmongOthersBinds) {
  FakeSystem s("memlimit_v1");
  put(s.proc / "self/cgroup", "12:pids:/a\n4:cpu,memory:/dfbench\n0::/\n");
  put(s.root / "memory/memory.limit_in_bytes", "9223372036854771712\n");  // the root: no limit
  put(s.root / "memory/dfbench/memory.limit_in_bytes", std::to_string(6 * GiB) + "\n");
  put(s.root / "memory/dfbench/memory.usage_in_bytes", std::to_string(2 * GiB) + "\n");
  put(s.root / "memory/dfbench/memory.stat", "cache 9\ntotal_inactive_file 0\n");
  auto m = s.read();
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->cgroup_binds);
  EXPECT_EQ(m->available, 4 * GiB);
  EXPECT_EQ(m->total, 6 * GiB);
}

TEST(MemoryLimit, ALooseLimitDoesNotBindButCapsTheTotal) {
  FakeSystem s("memlimit_loose", /*avail_kb=*/4 * 1024 * 1024);
  put(s.proc / "self/cgroup", "0::/svc\n");
  put(s.root / "svc/memory.max", std::to_string(16 * GiB) + "\n");
  put(s.root / "svc/memory.current", std::to_string(1 * GiB) + "\n");
  auto m = s.read();
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_FALSE(m->cgroup_binds);  // 15 GiB left in the cgroup, but the machine has 4
  EXPECT_EQ(m->available, 4 * GiB);
  EXPECT_EQ(m->total, 16 * GiB);
}

TEST(MemoryLimit, UnreadableMeminfoIsAnErrorAndBadCgroupFilesAreNoLimit) {
  FakeSystem s("memlimit_bad");
  put(s.proc / "self/cgroup", "garbage\n0::/x\n");
  put(s.root / "x/memory.max", "lots\n");
  auto m = s.read();
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_FALSE(m->cgroup_binds);
  EXPECT_EQ(m->available, 20 * GiB);
  fs::remove(s.proc / "meminfo");
  auto bad = s.read();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("meminfo"), std::string::npos) << bad.message();
}

TEST(MemoryLimit, AutoTierSizeSubtractsFromTheCgroupsRoom) {
  MemoryLimit m;
  m.available = 8 * GiB, m.total = 10 * GiB, m.cgroup_binds = true, m.cgroup_limit = 10 * GiB, m.cgroup_used = 2 * GiB;
  // margin = max(2 GiB, 5 % of 10 GiB) = 2 GiB; 8 - 1 - 0.5 - 0.5 - 2 = 4 GiB.
  const AutoTierSize a = auto_tier_bytes(m, 1 * GiB, GiB / 2, GiB / 2);
  EXPECT_EQ(a.bytes, 4 * GiB);
  EXPECT_NE(a.line.find("cgroup memory limit 10.74 GB - used 2.15"), std::string::npos) << a.line;
  m.available = 3 * GiB;  // less than what the rest needs: no tier, never a wrapped-around size
  EXPECT_EQ(auto_tier_bytes(m, 1 * GiB, GiB / 2, GiB / 2).bytes, 0u);
}

TEST(MemoryLimit, TheDescriptionNamesTheCgroupOnlyWhenItBinds) {
  FakeSystem s("memlimit_describe");
  put(s.proc / "self/cgroup", "0::/bench\n");
  put(s.root / "bench/memory.max", std::to_string(10 * GiB) + "\n");
  put(s.root / "bench/memory.current", std::to_string(2 * GiB) + "\n");
  auto m = s.read();
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(describe(*m), "8.6 GB available of 10.7 GB (memory cgroup: limit 10.7 GB, used 2.1 GB)");
  put(s.root / "bench/memory.max", "max\n");
  m = s.read();
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(describe(*m), "21.5 GB available of 25.8 GB");
}

}  // namespace
}  // namespace deltafin
