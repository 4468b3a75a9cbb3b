// The memory-bandwidth probe must read every word of its buffer: it splits
// each thread's slice into streams, and a word skipped there would make the
// yardstick read less than it claims.
#include <gtest/gtest.h>

#include "bench/membw.h"

namespace deltafin::bench {
namespace {

TEST(MembwProbe, OneRepReadsEveryWordOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const size_t bytes = (size_t(3) << 20) + 12345;  // 3 threads: slices of unequal length
    const ReadBandwidth bw = measure_read_bandwidth(bytes, pool, 1);
    ASSERT_GE(bw.bytes, size_t(3) << 20);
    ASSERT_EQ(bw.bytes % 8, 0u);
    uint64_t expect = 0;
    for (size_t i = 0; i < bw.bytes / 8; ++i) expect ^= i * 0x9E3779B97F4A7C15ull;  // the probe's fill
    EXPECT_EQ(bw.checksum, expect) << threads << " threads";
    EXPECT_GT(bw.bytes_per_s, 0.0);
  }
}

}  // namespace
}  // namespace deltafin::bench
