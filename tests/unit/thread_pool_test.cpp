#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace deltafin {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (size_t n : {0, 1, 5, 16, 17, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, 4, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "threads=" << threads << " n=" << n;
    }
  }
}

}  // namespace deltafin

namespace deltafin {

// Workers spin briefly after a job, then park: jobs posted while they spin,
// after they parked, and right after the pool was made all run exactly once.
TEST(ThreadPool, JobsReachSpinningAndParkedWorkers) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::atomic<int> sum{0};
    for (int round = 0; round < 200; ++round) {
      if (round % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // well past the spin
      pool.parallel_for(size_t(threads), 1, [&](size_t b, size_t e) { sum += int(e - b); });
    }
    EXPECT_EQ(sum.load(), 200 * threads);
  }
}

// A parallel_for inside a job runs on the calling thread (no deadlock) and
// still covers its range.
TEST(ThreadPool, NestedLoopsRunInline) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(64);
  pool.parallel_for(2, 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
      pool.parallel_for(32, 1, [&](size_t lo, size_t hi) {
        for (size_t j = lo; j < hi; ++j) hits[i * 32 + j]++;
      });
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

}  // namespace deltafin
