// The read engine's scheduling decisions (io/scheduler.h), which the engine and
// the drive simulator share.
#include <gtest/gtest.h>

#include "io/scheduler.h"

namespace deltafin::io {
namespace {

TEST(IoScheduler, ReplicaThatFinishesFirstWins) {
  // 1 MB read. Drive 0: 100 MB/s with 2 MB in flight -> 30 ms; drive 1: 50 MB/s, idle -> 20 ms.
  std::vector<ReplicaLoad> loads = {{2'000'000, 100e6}, {0, 50e6}};
  EXPECT_EQ(pick_replica(loads, 1'000'000), 1);
  // With only 0.5 MB in flight drive 0 finishes at 15 ms: it wins.
  loads[0].inflight_bytes = 500'000;
  EXPECT_EQ(pick_replica(loads, 1'000'000), 0);
  EXPECT_DOUBLE_EQ(finish_estimate(500'000, 1'000'000, 100e6), 0.015);
  // Ties go to the first (the primary); no replica -> -1.
  std::vector<ReplicaLoad> tie = {{0, 100e6}, {0, 100e6}};
  EXPECT_EQ(pick_replica(tie, 4096), 0);
  EXPECT_EQ(pick_replica({}, 4096), -1);
  // A rate of 0 counts as 1 B/s, never a division by zero.
  std::vector<ReplicaLoad> zero = {{0, 0.0}, {0, 10.0}};
  EXPECT_EQ(pick_replica(zero, 4096), 1);
}

TEST(IoScheduler, SplitFollowsRatesIn4KiBPieces) {
  EXPECT_FALSE(should_split(1, 64 << 20, 8 << 20));
  EXPECT_FALSE(should_split(2, (8 << 20) - 4096, 8 << 20));
  EXPECT_TRUE(should_split(2, 8 << 20, 8 << 20));

  const uint64_t span = 300 * 4096;
  const std::vector<double> rates = {100e6, 50e6};
  const auto pieces = split_by_rate(span, rates);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].replica, 0u);
  EXPECT_EQ(pieces[0].begin, 0u);
  EXPECT_EQ(pieces[0].length, 200u * 4096);  // two thirds
  EXPECT_EQ(pieces[1].begin, 200u * 4096);
  EXPECT_EQ(pieces[1].length, 100u * 4096);

  // Three replicas, uneven span: contiguous, 4 KiB-aligned cuts, the last takes the rest.
  const std::vector<double> r3 = {1, 2, 3};
  const uint64_t odd = 1000 * 4096 + 100;
  const auto p3 = split_by_rate(odd, r3);
  ASSERT_EQ(p3.size(), 3u);
  uint64_t at = 0;
  for (const auto& p : p3) {
    EXPECT_EQ(p.begin, at);
    EXPECT_EQ(p.begin % 4096, 0u);
    at += p.length;
  }
  EXPECT_EQ(at, odd);
  // A share that rounds to nothing gets no piece.
  const std::vector<double> lopsided = {1e3, 1e9};
  const auto p1 = split_by_rate(8 * 4096, lopsided);
  ASSERT_EQ(p1.size(), 1u);
  EXPECT_EQ(p1[0].replica, 1u);
  EXPECT_EQ(p1[0].length, 8u * 4096);
}

TEST(IoScheduler, AdmissionKeepsDemandAheadOfPrefetch) {
  DriveSlots s{4, 8, 0, 0, true, true};
  EXPECT_EQ(admit_next(s), Purpose::Demand);
  s.demand_queued = false;
  // Prefetch may take at most depth - 1 slots (min with its budget): 3 here.
  s.inflight_prefetch = 2;
  EXPECT_EQ(admit_next(s), Purpose::Prefetch);
  s.inflight_prefetch = 3;
  EXPECT_EQ(admit_next(s), std::nullopt);
  s.demand_queued = true;  // the slot left is demand's
  EXPECT_EQ(admit_next(s), Purpose::Demand);
  s.inflight_demand = 1;  // full
  EXPECT_EQ(admit_next(s), std::nullopt);
  // Prefetch budget below depth - 1 binds.
  DriveSlots b{32, 2, 0, 2, false, true};
  EXPECT_EQ(admit_next(b), std::nullopt);
  // Depth 1: a prefetch may use the only slot when no demand waits.
  DriveSlots one{1, 8, 0, 0, false, true};
  EXPECT_EQ(admit_next(one), Purpose::Prefetch);
  EXPECT_EQ(admit_next(DriveSlots{4, 8, 0, 0, false, false}), std::nullopt);
  EXPECT_EQ(drive_depth(true, 32, 8), 32);
  EXPECT_EQ(drive_depth(false, 32, 8), 8);
  EXPECT_EQ(drive_depth(false, 4, 8), 4);
}

TEST(IoScheduler, RateEstimateLearnsInWindows) {
  RateEstimator est;
  est.rate = 1000e6;
  est.observe(0.010, 8 << 20);  // under 20 ms: no sample
  EXPECT_EQ(est.rate, 1000e6);
  est.observe(0.040, 2 << 20);  // under 4 MiB: no sample
  EXPECT_EQ(est.rate, 1000e6);
  est.observe(0.040, 20'000'000);  // 500 MB/s sample: 0.65 * 1000 + 0.35 * 500
  EXPECT_DOUBLE_EQ(est.rate, 825e6);
  EXPECT_EQ(est.window_bytes0, 20'000'000u);
  EXPECT_DOUBLE_EQ(est.window_busy0, 0.040);
  est.observe(0.050, 40'000'000);  // 10 ms since the window began: no sample yet
  EXPECT_DOUBLE_EQ(est.rate, 825e6);
}

}  // namespace
}  // namespace deltafin::io
