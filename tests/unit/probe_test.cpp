// The raw drive probe (io/probe.h): it reads what it says, and its reads go
// round at least kProbeFootprint bytes of memory (qd x block where larger).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "io/probe.h"

namespace deltafin::io {
namespace {

struct ProbeFile {
  std::string path;
  explicit ProbeFile(uint64_t bytes) {
    path = (std::filesystem::temp_directory_path() / ("deltafin-probe-test-" + std::to_string(::getpid()))).string();
    std::ofstream f(path, std::ios::binary);
    std::vector<char> block(1 << 20, 7);
    for (uint64_t done = 0; done < bytes; done += block.size()) f.write(block.data(), std::streamsize(block.size()));
  }
  ~ProbeFile() { std::remove(path.c_str()); }
};

TEST(Probe, ReadsWhatItSaysIntoTheFootprint) {
  ProbeFile file(8 << 20);
  // Byte-bounded: 64 reads of 64 KiB, whatever the time.
  auto r = probe_files({file.path}, 64 << 10, 4, 4 << 20, 60.0);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->bytes, uint64_t(4) << 20);
  EXPECT_EQ(r->footprint, kProbeFootprint);  // 1,024 slots of 64 KiB
  EXPECT_GT(r->mb_s, 0);
}

TEST(Probe, FootprintCoversTheQueueWhenBlocksAreLarge) {
  ProbeFile file(24 << 20);
  auto r = probe_files({file.path}, 24 << 20, 4, 48 << 20, 60.0);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->bytes, uint64_t(48) << 20);
  EXPECT_EQ(r->footprint, uint64_t(96) << 20);  // 4 x 24 MiB: more than kProbeFootprint
}

TEST(Probe, AFootprintOfZeroIsOneBufferPerReadInFlight) {
  ProbeFile file(1 << 20);
  auto r = probe_files({file.path}, 64 << 10, 4, 1 << 20, 60.0, 1, 0);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->bytes, uint64_t(1) << 20);
  EXPECT_EQ(r->footprint, uint64_t(4) * (64 << 10));
}

TEST(Probe, RefusesAnUnalignedBlock) {
  ProbeFile file(1 << 20);
  EXPECT_FALSE(probe_files({file.path}, 1000, 4, 1 << 20, 1.0).ok());
}

}  // namespace
}  // namespace deltafin::io
