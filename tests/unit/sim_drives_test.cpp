// The drive simulator (src/sim): hand-computed times, replica choice through
// the engine's scheduler, a shared link's cap, the drive ladder, trace parsing
// and the simulate-drives command's errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <random>

#include "checkpoint_test_util.h"
#include "sim/simulate.h"
#include "store/placement.h"

namespace deltafin::sim {
namespace {

constexpr double kMs = 1e-3;

SimOptions two_drives(double lat_us, int qd) {
  SimOptions o;
  o.drives = {{100, lat_us, qd}, {50, lat_us, qd}};  // A: 100 MB/s, B: 50 MB/s
  return o;
}

// 2 MoE layers x 4 experts, span 1 MB (10^6 bytes); in both layers experts
// 0, 1, 2 live on A and expert 3 on B. A: 100 MB/s, B: 50 MB/s, 100 us
// latency, queue depth 2. A read of 1 MB alone: 0.1 + 10 ms on A, 0.1 + 20 ms
// on B; two together on A share 100 MB/s: both end at 0.1 + 20 ms.
//
// token 0, layer 0 {0,1,2,3}: A admits 0 and 1 (QD 2) -> both end 20.1 ms;
//   2 starts at 20.1, latency to 20.2, alone 10 ms -> 30.2 ms.
//   B: 3 -> 20.1 ms. Layer: 30.2 ms.
// token 0, layer 1 {0,3}: A 10.1 ms, B 20.1 ms -> 20.1 ms. Token 0: 50.3 ms.
// token 1, layer 0 {2}: A 10.1 ms. Layer 1 {1,2}: A, both -> 20.1 ms. Token 1: 30.2 ms.
// Mean 40.25 ms per token, trace 80.5 ms. With 1 ms of compute per layer:
// +2 ms per token -> 42.25 ms.
SimWorkload toy_workload() {
  SimWorkload w;
  w.moe_layers = 2;
  w.experts = 4;
  w.span = 1'000'000;
  for (int m = 0; m < 2; ++m)
    for (int e = 0; e < 4; ++e) w.copies.push_back({e < 3 ? 0 : 1});
  w.steps = {RouteStep{0, 1, false, {{0, 1, 2, 3}, {0, 3}}}, RouteStep{1, 1, false, {{2}, {1, 2}}}};
  return w;
}

TEST(SimDrives, ToyTraceMatchesHandComputedTimes) {
  auto r = simulate(two_drives(100, 2), toy_workload());
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->steps.size(), 2u);
  EXPECT_NEAR(r->steps[0].seconds, 50.3 * kMs, 1e-9);
  EXPECT_NEAR(r->steps[1].seconds, 30.2 * kMs, 1e-9);
  EXPECT_NEAR(r->per_token_s(), 40.25 * kMs, 1e-9);
  EXPECT_NEAR(r->total_s, 80.5 * kMs, 1e-9);
  EXPECT_EQ(r->decode_steps, 2);
  EXPECT_EQ(r->bytes, 9'000'000u);
  EXPECT_EQ(r->drives[0].bytes, 7'000'000u);
  EXPECT_EQ(r->drives[1].bytes, 2'000'000u);

  SimWorkload w = toy_workload();
  w.compute_s_per_layer = 1 * kMs;
  auto c = simulate(two_drives(100, 2), w);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_NEAR(c->per_token_s(), 42.25 * kMs, 1e-9);
}

TEST(SimDrives, AVerifyBlockReadsItsUnionOnceAndSpreadsItsTimeOverItsRows) {
  // The toy trace's two tokens as one verify block of 2 rows: per layer the
  // union ({0,1,2,3} and {0,1,2,3}: 8 reads instead of 4 + 2 + 1 + 2 = 9).
  SimWorkload w = toy_workload();
  w.steps = {RouteStep{0, 2, false, {{0, 1, 2, 3}, {0, 1, 2, 3}}}};
  auto r = simulate(two_drives(100, 2), w);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->decode_steps, 1);
  EXPECT_EQ(r->decode_tokens, 2);
  EXPECT_EQ(r->bytes, 8'000'000u);
  EXPECT_NEAR(r->per_token_s(), r->steps[0].seconds / 2, 1e-12);
  // Layer 0 as in the toy trace (30.2 ms), layer 1 the same reads (30.2 ms):
  // 60.4 ms for the block, 30.2 ms a row, against 40.25 ms a token unblocked.
  EXPECT_NEAR(r->steps[0].seconds, 60.4 * kMs, 1e-9);
}

TEST(SimDrives, LatencyOverlapsAnotherRequestsTransfer) {
  // One drive, 100 MB/s, 100 us, QD 2; reads of 1, 3 and 1 MB submitted together.
  // 0.1 ms: r1 and r2 transfer at 50 MB/s each; r1 ends at 20.1 ms (r2 has 2 MB left).
  // 20.1-20.2: r3's latency; r2 alone at 100 MB/s moves 0.01 MB (1.99 MB left).
  // 20.2: r2, r3 at 50 MB/s; r3 ends at 40.2 ms; r2 has 0.99 MB left, alone: 50.1 ms.
  SimOptions o;
  o.drives = {{100, 100, 2}};
  auto ds = DriveSim::create(o);
  ASSERT_TRUE(ds.ok()) << ds.message();
  const std::vector<SimRead> reads = {{{0}, 1'000'000}, {{0}, 3'000'000}, {{0}, 1'000'000}};
  ASSERT_TRUE(ds->run_batch(reads).ok());
  EXPECT_NEAR(ds->now(), 50.1 * kMs, 1e-9);
  EXPECT_NEAR(ds->stats()[0].busy_seconds, 50.1 * kMs, 1e-9);
}

TEST(SimDrives, ReplicaGoesToTheDriveThatFinishesFirst) {
  SimOptions o = two_drives(0, 32);
  {
    // Two 1 MB reads already on A (100 MB/s): a third with copies on A and B
    // would finish at 30 ms on A, 20 ms on B -> B. All done at 20 ms.
    auto ds = DriveSim::create(o);
    ASSERT_TRUE(ds.ok());
    const std::vector<SimRead> reads = {{{0}, 1'000'000}, {{0}, 1'000'000}, {{0, 1}, 1'000'000}};
    ASSERT_TRUE(ds->run_batch(reads).ok());
    EXPECT_EQ(ds->stats()[0].bytes, 2'000'000u);
    EXPECT_EQ(ds->stats()[1].bytes, 1'000'000u);
    EXPECT_NEAR(ds->now(), 20 * kMs, 1e-9);
  }
  {
    // Idle drives: the faster one (A) even when B is the primary.
    auto ds = DriveSim::create(o);
    ASSERT_TRUE(ds.ok());
    const std::vector<SimRead> reads = {{{1, 0}, 1'000'000}};
    ASSERT_TRUE(ds->run_batch(reads).ok());
    EXPECT_EQ(ds->stats()[0].bytes, 1'000'000u);
    EXPECT_NEAR(ds->now(), 10 * kMs, 1e-9);
  }
  {
    // A read at least split_min long is split 2:1 (by rate): both halves end together.
    SimOptions s = o;
    s.split_min = 4096;
    auto ds = DriveSim::create(s);
    ASSERT_TRUE(ds.ok());
    const std::vector<SimRead> reads = {{{0, 1}, 300 * 4096}};
    ASSERT_TRUE(ds->run_batch(reads).ok());
    EXPECT_EQ(ds->split_reads(), 1u);
    EXPECT_EQ(ds->stats()[0].bytes, 200u * 4096);
    EXPECT_EQ(ds->stats()[1].bytes, 100u * 4096);
    EXPECT_NEAR(ds->now(), 200 * 4096 / 100e6, 1e-9);
  }
}

TEST(SimDrives, SharedLinkCapsTheAggregate) {
  // Two 100 MB/s drives, no latency, one 1 MB read each. Alone: 10 ms.
  // Behind a 150 MB/s link each gets 75 MB/s: 13.33 ms, 150 MB/s in total.
  SimOptions o;
  o.drives = {{100, 0, 32}, {100, 0, 32}};
  const std::vector<SimRead> reads = {{{0}, 1'000'000}, {{1}, 1'000'000}};
  for (double link : {0.0, 250.0, 150.0}) {
    o.link_mb_s = link;
    auto ds = DriveSim::create(o);
    ASSERT_TRUE(ds.ok());
    ASSERT_TRUE(ds->run_batch(reads).ok());
    const double want = link == 150 ? 2e6 / 150e6 : 10 * kMs;
    EXPECT_NEAR(ds->now(), want, 1e-9) << "link " << link;
    EXPECT_LE(2e6 / ds->now(), (link > 0 ? link : 200) * 1e6 * (1 + 1e-9));
  }
}

TEST(SimDrives, PerRequestRateLimitsFewRequests) {
  // One 100 MB/s drive, no latency, QD 4, a request at most 40 MB/s; n reads
  // of 1 MB together each move at min(40, 100 / n) MB/s: n = 1 and 2 take
  // 25 ms, n = 3 takes 30 ms (the drive's bandwidth is the limit then).
  SimOptions o;
  o.drives = {{100, 0, 4, 40}};
  for (auto [n, want_ms] : {std::pair{1, 25.0}, std::pair{2, 25.0}, std::pair{3, 30.0}}) {
    auto ds = DriveSim::create(o);
    ASSERT_TRUE(ds.ok()) << ds.message();
    const std::vector<SimRead> reads(size_t(n), SimRead{{0}, 1'000'000});
    ASSERT_TRUE(ds->run_batch(reads).ok());
    EXPECT_NEAR(ds->now(), want_ms * kMs, 1e-9) << n << " reads";
  }
  o.drives[0].request_mb_s = -1;
  EXPECT_FALSE(DriveSim::create(o).ok());
}

TEST(SimDrives, LadderOfIdenticalDrivesApproachesLinear) {
  // 4 MoE layers x 64 experts of 1 MB; each token routes 48 experts per layer
  // (fixed seed). Placement as prepare plans it for k identical drives.
  SimWorkload w;
  w.moe_layers = 4;
  w.experts = 64;
  w.span = 1 << 20;
  std::mt19937 rng(7);
  for (int t = 0; t < 8; ++t) {
    RouteStep s{t, 1, false, {}};
    for (int m = 0; m < 4; ++m) {
      std::vector<int> ids(64);
      for (int e = 0; e < 64; ++e) ids[e] = e;
      std::shuffle(ids.begin(), ids.end(), rng);
      ids.resize(48);
      std::sort(ids.begin(), ids.end());
      s.experts.push_back(ids);
    }
    w.steps.push_back(s);
  }
  SimOptions base;
  auto ladder = drive_ladder(4, base, {{2000, 80, 32}}, w, {}, 0);
  ASSERT_TRUE(ladder.ok()) << ladder.message();
  ASSERT_EQ(ladder->size(), 4u);
  EXPECT_DOUBLE_EQ((*ladder)[0].speedup, 1.0);
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_GT((*ladder)[k].speedup, (*ladder)[k - 1].speedup);
    EXPECT_LE((*ladder)[k].speedup, double(k + 1) + 1e-9);  // never better than linear
  }
  EXPECT_GT((*ladder)[3].speedup, 3.0);  // 48 of 64: about 12-14 reads on the busiest of 4 drives
  // Every expert of every layer: perfectly balanced, within 1 % of linear.
  for (auto& s : w.steps)
    for (auto& ids : s.experts) {
      ids.resize(64);
      for (int e = 0; e < 64; ++e) ids[e] = e;
    }
  auto full = drive_ladder(4, base, {{2000, 80, 32}}, w, {}, 0);
  ASSERT_TRUE(full.ok());
  EXPECT_GT((*full)[3].speedup, 4 * 0.99);
}

// A uniform K3-like routing (fixed seed): `layers` MoE layers of 896 experts,
// top-16, `tokens` decode steps.
SimWorkload uniform_top16(int layers, int tokens, uint64_t span, unsigned seed) {
  SimWorkload w;
  w.moe_layers = layers;
  w.experts = 896;
  w.span = span;
  std::mt19937 rng(seed);
  for (int t = 0; t < tokens; ++t) {
    RouteStep s{t, 1, false, {}};
    for (int m = 0; m < layers; ++m) {
      std::vector<int> ids(896);
      for (int e = 0; e < 896; ++e) ids[e] = e;
      std::shuffle(ids.begin(), ids.end(), rng);
      ids.resize(16);
      std::sort(ids.begin(), ids.end());
      s.experts.push_back(ids);
    }
    w.steps.push_back(s);
  }
  return w;
}

TEST(SimDrives, ReplicasNeverSlowTheLadder) {
  // 4 identical 7 GB/s drives, every expert replicated, as prepare plans it:
  // each rung at least as fast as without replicas, for the k3s span (whole
  // reads, the batch assignment) and the K3 span (split reads, water-filled).
  SimOptions base;
  const auto all = default_hot_order(4, 896);
  for (uint64_t span : {uint64_t(3133440), uint64_t(17547264)}) {
    const SimWorkload w = uniform_top16(4, 12, span, 5);
    auto without = drive_ladder(4, base, {{7000, 80, 32}}, w, {}, 0);
    auto with = drive_ladder(4, base, {{7000, 80, 32}}, w, all, all.size());
    ASSERT_TRUE(without.ok() && with.ok());
    for (size_t k = 1; k < 4; ++k)
      EXPECT_LE((*with)[k].per_token_s, (*without)[k].per_token_s * (1 + 1e-9)) << k + 1 << " drives, span " << span;
    // Measured with this trace: 1.98x / 2.62x / 3.83x (k3s span) and 2.00x /
    // 2.77x / 3.60x (K3 span); without replicas 2.51x and 2.54x on 4 drives.
    EXPECT_GE((*with)[1].speedup, 1.8) << "span " << span;
    EXPECT_GE((*with)[3].speedup, 3.4) << "span " << span;
  }
}

TEST(SimDrives, TraceStepsAndPrefillBlock) {
  testing::ScratchDir dir("sim-trace");
  const auto path = dir.path() / "trace.jsonl";
  testing::write_file(path,
                      "{\"pos\":0,\"layer\":1,\"experts\":[3,1]}\n{\"pos\":0,\"layer\":2,\"experts\":[0,2]}\n"
                      "{\"pos\":1,\"layer\":1,\"experts\":[1,2]}\n{\"pos\":1,\"layer\":2,\"experts\":[2,3]}\n"
                      "\n{\"pos\":2,\"layer\":1,\"experts\":[0,1]}\n{\"pos\":2,\"layer\":2,\"experts\":[1]}\n");
  auto t = read_route_steps(path.string(), {}, 2, 4, 2);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->positions, 3);
  EXPECT_EQ(t->layers, (std::vector<int>{1, 2}));
  ASSERT_EQ(t->steps.size(), 2u);
  EXPECT_TRUE(t->steps[0].prefill);
  EXPECT_EQ(t->steps[0].tokens, 2);
  EXPECT_EQ(t->steps[0].experts[0], (std::vector<int>{1, 2, 3}));  // union, ascending
  EXPECT_EQ(t->steps[0].experts[1], (std::vector<int>{0, 2, 3}));
  EXPECT_FALSE(t->steps[1].prefill);
  EXPECT_EQ(t->steps[1].first_pos, 2);
  EXPECT_EQ(t->steps[1].experts[1], (std::vector<int>{1}));
  auto all_decode = read_route_steps(path.string(), {}, 2, 4, 0);
  ASSERT_TRUE(all_decode.ok());
  EXPECT_EQ(all_decode->steps.size(), 3u);

  // Verify blocks of 2 rows: positions 0+1 read as one union, 2 alone (the last block is short).
  auto blocks = read_route_steps(path.string(), {}, 2, 4, 0, 2);
  ASSERT_TRUE(blocks.ok()) << blocks.message();
  ASSERT_EQ(blocks->steps.size(), 2u);
  EXPECT_FALSE(blocks->steps[0].prefill);
  EXPECT_EQ(blocks->steps[0].tokens, 2);
  EXPECT_EQ(blocks->steps[0].experts[0], (std::vector<int>{1, 2, 3}));  // {1,3} and {1,2}
  EXPECT_EQ(blocks->steps[0].experts[1], (std::vector<int>{0, 2, 3}));  // {0,2} and {2,3}
  EXPECT_EQ(blocks->steps[1].first_pos, 2);
  EXPECT_EQ(blocks->steps[1].tokens, 1);
  // After a prefill block of 1: one verify block of positions 1 and 2.
  auto after_prompt = read_route_steps(path.string(), {}, 2, 4, 1, 2);
  ASSERT_TRUE(after_prompt.ok()) << after_prompt.message();
  ASSERT_EQ(after_prompt->steps.size(), 2u);
  EXPECT_TRUE(after_prompt->steps[0].prefill);
  EXPECT_EQ(after_prompt->steps[0].tokens, 1);
  EXPECT_EQ(after_prompt->steps[1].first_pos, 1);
  EXPECT_EQ(after_prompt->steps[1].tokens, 2);
  EXPECT_EQ(after_prompt->steps[1].experts[0], (std::vector<int>{0, 1, 2}));  // {1,2} and {0,1}
  EXPECT_EQ(after_prompt->steps[1].experts[1], (std::vector<int>{1, 2, 3}));  // {2,3} and {1}
  EXPECT_FALSE(read_route_steps(path.string(), {}, 2, 4, 0, 0).ok());

  // Errors name the file and line.
  testing::write_file(dir.path() / "bad1", "{\"pos\":0,\"layer\":1,\"experts\":[9]}\n");
  auto bad = read_route_steps((dir.path() / "bad1").string(), {}, 2, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("bad1:1: an expert id is out of range"), std::string::npos) << bad.message();
  testing::write_file(dir.path() / "bad2", "{\"pos\":0,\"layer\":1,\"experts\":[1]}\nnot json\n");
  bad = read_route_steps((dir.path() / "bad2").string(), {}, 2, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("bad2:2: not valid JSON"), std::string::npos) << bad.message();
  testing::write_file(dir.path() / "bad3", "{\"pos\":0,\"layer\":7,\"experts\":[1]}\n");
  bad = read_route_steps((dir.path() / "bad3").string(), {1, 2}, 0, 4, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("layer 7 is not an MoE layer"), std::string::npos) << bad.message();
  EXPECT_FALSE(read_route_steps((dir.path() / "missing").string(), {}, 2, 4, 0).ok());
}

TEST(SimDrives, DriveModelParsing) {
  auto m = parse_drive_model("3000:80:16");
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->mb_s, 3000);
  EXPECT_EQ(m->latency_us, 80);
  EXPECT_EQ(m->queue_depth, 16);
  EXPECT_EQ(m->request_mb_s, 0);  // no per-request limit unless given
  auto q = parse_drive_model("3000:80:4:1200");
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->request_mb_s, 1200);
  auto d = parse_drive_model("1500.5");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->mb_s, 1500.5);
  EXPECT_EQ(d->latency_us, DriveModel{}.latency_us);
  EXPECT_EQ(d->queue_depth, DriveModel{}.queue_depth);
  for (const char* bad :
       {"", "fast", "0", "-5", "100:x", "100:-1", "100:10:0", "100:10:2.5", "100:1:2:3:4", "100:1:2:-3", "100:", "1e400"})
    EXPECT_FALSE(parse_drive_model(bad).ok()) << bad;
}

TEST(SimDrives, CommandPrintsLadderAndRejectsBadInput) {
  testing::ScratchDir dir("sim-cli");
  const auto trace = dir.path() / "t.jsonl";
  std::string text;
  for (int p = 0; p < 6; ++p)
    for (int l = 1; l <= 2; ++l)
      text +=
          fmt::format("{{\"pos\":{},\"layer\":{},\"experts\":[{},{},{}]}}\n", p, l, p % 8, (p + 3) % 8, (p + 5) % 8);
  testing::write_file(trace, text);
  const std::string base =
      fmt::format("simulate-drives --trace {} --experts 8 --moe-layers 2 --span-bytes 1048576", trace.string());
  const auto svg = dir.path() / "l.svg", json = dir.path() / "r.json";
  auto ok =
      testing::run_deltafin(base + fmt::format(" --drive 2000:80:32 --ladder 3 --replicate-hot all --prompt-tokens 2 "
                                               "--svg {} --json {}",
                                               svg.string(), json.string()),
                            dir.path());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("prefill block"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("ladder"), std::string::npos) << ok.out;
  const std::string s = testing::read_file(svg);
  EXPECT_NE(s.find("ideal (linear)"), std::string::npos);
  const auto j = nlohmann::json::parse(testing::read_file(json));
  ASSERT_EQ(j["ladder"].size(), 3u);
  EXPECT_EQ(j["ladder"][0]["speedup"].get<double>(), 1.0);
  ASSERT_EQ(j["steps"].size(), 5u);  // the prefill block (positions 0, 1) + 4 decode steps
  EXPECT_TRUE(j["steps"][0]["prefill"].get<bool>());
  EXPECT_EQ(j["steps"][0]["tokens"].get<int>(), 2);
  EXPECT_EQ(j["tokens"].get<int>(), 6);

  struct Bad {
    std::string args, message;
  };
  const std::vector<Bad> bads = {
      {base + " --drive fast", "--drive 'fast': bandwidth"},
      {base + " --drive probe:" + dir.str() + "/absent", "not a directory"},
      {base, "give at least one --drive"},
      {fmt::format("simulate-drives --trace {} --experts 8 --drive 100", trace.string()), "are all required"},
      {base + " --drive 100 --replicate-hot 4", "at least two --drive"},
      {base + " --drive 100 --replicate-hot many --ladder 2", "--replicate-hot 'many'"},
      {base + " --drive 100 --svg " + svg.string(), "give --ladder"},
      {fmt::format("simulate-drives --trace {}/none --experts 8 --moe-layers 2 --span-bytes 4096 --drive 100",
                   dir.str()),
       "cannot open the route trace"},
      {fmt::format("simulate-drives --trace {} --experts 4 --moe-layers 2 --span-bytes 4096 --drive 100",
                   trace.string()),
       "expert id is out of range"},
      {fmt::format("simulate-drives --trace {} --store {}/nostore --drive 100", trace.string(), dir.str()), "nostore"},
  };
  for (const auto& b : bads) {
    auto r = testing::run_deltafin(b.args, dir.path());
    EXPECT_TRUE(r.exited) << b.args;
    EXPECT_NE(r.code, 0) << b.args;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << b.args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace deltafin::sim
