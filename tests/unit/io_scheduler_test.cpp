// The read engine's scheduling decisions (io/scheduler.h), which the engine and
// the drive simulator share.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "io/scheduler.h"

namespace deltafin::io {
namespace {

// Loads with nothing in flight.
std::vector<ReplicaLoad> idle(const std::vector<double>& rates) {
  std::vector<ReplicaLoad> out;
  for (double r : rates) out.push_back({0, r});
  return out;
}

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
  const auto pieces = split_by_eta(span, idle(rates));
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].replica, 0u);
  EXPECT_EQ(pieces[0].begin, 0u);
  EXPECT_EQ(pieces[0].length, 200u * 4096);  // two thirds
  EXPECT_EQ(pieces[1].begin, 200u * 4096);
  EXPECT_EQ(pieces[1].length, 100u * 4096);

  // Three replicas, uneven span: contiguous, 4 KiB-aligned cuts, the last takes the rest.
  const std::vector<double> r3 = {1, 2, 3};
  const uint64_t odd = 1000 * 4096 + 100;
  const auto p3 = split_by_eta(odd, idle(r3));
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
  const auto p1 = split_by_eta(8 * 4096, idle(lopsided));
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

TEST(IoScheduler, SplitWaterFillsAroundBytesInFlight) {
  constexpr uint64_t kPage = 4096;
  constexpr double kRate = double(1 << 30);  // a power of two: the shares below are exact
  // Equal rates, 100 pages already in flight on replica 1; 300 pages to read:
  // both finish after (300 + 100) / 2 = 200 pages, so 200 and 100.
  std::vector<ReplicaLoad> loads = {{0, kRate}, {100 * kPage, kRate}};
  auto p = split_by_eta(300 * kPage, loads);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].replica, 0u);
  EXPECT_EQ(p[0].begin, 0u);
  EXPECT_EQ(p[0].length, 200 * kPage);
  EXPECT_EQ(p[1].replica, 1u);
  EXPECT_EQ(p[1].begin, 200 * kPage);
  EXPECT_EQ(p[1].length, 100 * kPage);
  // The busy one first in order: 400 in flight on replica 0 and 300 pages to
  // read; replica 1 alone would finish after 300 pages, before replica 0
  // frees up, so it takes all and replica 0 gets no (zero-length) piece.
  loads = {{400 * kPage, kRate}, {0, kRate}};
  p = split_by_eta(300 * kPage, loads);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].replica, 1u);
  EXPECT_EQ(p[0].begin, 0u);
  EXPECT_EQ(p[0].length, 300 * kPage);
  // Three replicas: 0 and 10 pages in flight at rate R, 30 pages at 2R; 90
  // pages: finish T (in pages at R) with T + (T - 10) + (2T - 30) = 90, T = 32.5:
  // shares 32.5, 22.5, 35 -> cumulative 32.5, 55 cut at 32 and 55 pages.
  loads = {{0, kRate}, {10 * kPage, kRate}, {30 * kPage, 2 * kRate}};
  p = split_by_eta(90 * kPage, loads);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].length, 32 * kPage);
  EXPECT_EQ(p[1].begin, 32 * kPage);
  EXPECT_EQ(p[1].length, 23 * kPage);
  EXPECT_EQ(p[2].begin, 55 * kPage);
  EXPECT_EQ(p[2].length, 35 * kPage);
  EXPECT_TRUE(split_by_eta(4096, {}).empty());
}

TEST(IoScheduler, BatchAssignmentMovesReadsDownAChain) {
  // Three idle drives of equal rate, unit reads on copies {0,1}, {1,2}, {0,1}.
  // One by one: read 0 -> drive 0 (tie), read 1 -> drive 1, read 2 -> drive 0:
  // drive 0 ends with 2. The chain 0 -> 1 -> 2 (read 0 to drive 1, read 1 to
  // drive 2) leaves one read on each.
  const std::vector<ReplicaLoad> drives(3, ReplicaLoad{0, 1e9});
  const std::vector<BatchRead> reads = {{{0, 1}, 4096}, {{1, 2}, 4096}, {{0, 1}, 4096}};
  EXPECT_EQ(assign_replicas(reads, drives), (std::vector<int>{1, 1, 0}));
  // Bytes already in flight count: with drive 2 busy, the one-by-one picks stand.
  std::vector<ReplicaLoad> busy = drives;
  busy[2].inflight_bytes = 8192;
  EXPECT_EQ(assign_replicas(reads, busy), (std::vector<int>{0, 0, 0}));
  // A read with no usable replica gets -1; the others are still assigned.
  const std::vector<BatchRead> none = {{{}, 4096}, {{2}, 4096}};
  EXPECT_EQ(assign_replicas(none, drives), (std::vector<int>{-1, 0}));
}

TEST(IoScheduler, BatchPlanCutsSplitReadsFirstThenAssigns) {
  constexpr uint64_t kPage = 4096;
  const std::vector<ReplicaLoad> drives = {{0, double(1 << 30)}, {4 * kPage, double(1 << 30)}};
  // split_min 8 pages. A (12 pages on drives 0 and 1) is split: both finish
  // after (12 + 4) / 2 = 8 pages, so 8 on drive 0 and 4 on drive 1; then B (4
  // pages, copies on drives 1 and 0) sees 8 and 8 in flight and takes its first
  // copy; C has no drive and gets nothing.
  const std::vector<BatchRead> reads = {{{0, 1}, 12 * kPage}, {{1, 0}, 4 * kPage}, {{}, 4 * kPage}};
  const auto plan = plan_batch(reads, drives, 8 * kPage);
  ASSERT_EQ(plan.size(), 3u);
  ASSERT_EQ(plan[0].size(), 2u);
  EXPECT_EQ(plan[0][0].replica, 0u);
  EXPECT_EQ(plan[0][0].length, 8 * kPage);
  EXPECT_EQ(plan[0][1].replica, 1u);
  EXPECT_EQ(plan[0][1].begin, 8 * kPage);
  EXPECT_EQ(plan[0][1].length, 4 * kPage);
  ASSERT_EQ(plan[1].size(), 1u);
  EXPECT_EQ(plan[1][0].replica, 0u);
  EXPECT_EQ(plan[1][0].begin, 0u);
  EXPECT_EQ(plan[1][0].length, 4 * kPage);
  EXPECT_TRUE(plan[2].empty());
  // Without the split (split_min above A), A and B are whole: A on drive 0
  // (idle), B on drive 1 behind its 4 pages (finishes at 8, drive 0 at 12)
  // rather than drive 0 (16).
  const auto whole = plan_batch(reads, drives, 16 * kPage);
  ASSERT_EQ(whole[0].size(), 1u);
  EXPECT_EQ(whole[0][0].replica, 0u);
  EXPECT_EQ(whole[0][0].length, 12 * kPage);
  ASSERT_EQ(whole[1].size(), 1u);
  EXPECT_EQ(whole[1][0].replica, 0u);  // its first copy: drive 1
}

TEST(IoScheduler, BatchAssignmentNeverFinishesLaterThanOneByOne) {
  // Random batches (fixed seed): the busiest drive's finish estimate after
  // assign_replicas is never later than after sequential pick_replica.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const int D = 2 + int(rng() % 5);
    std::vector<ReplicaLoad> drives;
    for (int d = 0; d < D; ++d) drives.push_back({uint64_t(rng() % 4) << 20, double(1 + rng() % 3) * 1e9});
    std::vector<BatchRead> reads(1 + rng() % 24);
    for (auto& r : reads) {
      r.span = uint64_t(1 + rng() % 3) << 20;
      for (int d = 0; d < D; ++d)
        if (rng() % 2) r.drives.push_back(d);
      if (r.drives.empty()) r.drives.push_back(int(rng() % D));
    }
    auto busiest = [&](const std::vector<int>& pick) {
      std::vector<double> bytes;
      for (const auto& d : drives) bytes.push_back(double(d.inflight_bytes));
      for (size_t i = 0; i < reads.size(); ++i) bytes[size_t(reads[i].drives[size_t(pick[i])])] += double(reads[i].span);
      double worst = 0;
      for (int d = 0; d < D; ++d) worst = std::max(worst, bytes[size_t(d)] / drives[size_t(d)].rate);
      return worst;
    };
    std::vector<int> greedy;
    std::vector<uint64_t> inflight;
    for (const auto& d : drives) inflight.push_back(d.inflight_bytes);
    for (const auto& r : reads) {
      std::vector<ReplicaLoad> loads;
      for (int d : r.drives) loads.push_back({inflight[size_t(d)], drives[size_t(d)].rate});
      greedy.push_back(pick_replica(loads, r.span));
      inflight[size_t(r.drives[size_t(greedy.back())])] += r.span;
    }
    const auto batch = assign_replicas(reads, drives);
    ASSERT_EQ(batch.size(), reads.size());
    for (size_t i = 0; i < reads.size(); ++i) ASSERT_TRUE(batch[i] >= 0 && size_t(batch[i]) < reads[i].drives.size());
    EXPECT_LE(busiest(batch), busiest(greedy) * (1 + 1e-12)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace deltafin::io
