// The benchmark harness's own logic: balanced ordering, the token oracle,
// flag splitting, and the summary arithmetic (read amplification, roofline).
#include <gtest/gtest.h>

#include <map>

#include "bench/harness.h"

namespace deltafin::bench {
namespace {

TEST(BenchOrder, EvenRepetitionsGiveEveryArmTheSameMeanPosition) {
  for (int arms = 1; arms <= 5; ++arms)
    for (int reps = 2; reps <= 8; reps += 2) {
      const std::vector<int> order = balanced_order(arms, reps);
      ASSERT_EQ(order.size(), size_t(arms * reps));
      std::map<int, int> count, position_sum;
      for (size_t i = 0; i < order.size(); ++i) count[order[i]]++, position_sum[order[i]] += int(i % arms);
      for (int a = 0; a < arms; ++a) {
        EXPECT_EQ(count[a], reps) << arms << " arms, " << reps << " reps";
        // Position inside each repetition: i forwards, arms-1-i backwards -> mean (arms-1)/2 for everyone.
        EXPECT_EQ(2 * position_sum[a], reps * (arms - 1)) << "arm " << a;
      }
      // Each repetition is a permutation of the arms.
      for (int r = 0; r < reps; ++r) {
        std::vector<int> seen(arms, 0);
        for (int i = 0; i < arms; ++i) seen[order[r * arms + i]]++;
        for (int a = 0; a < arms; ++a) EXPECT_EQ(seen[a], 1);
      }
    }
}

TEST(BenchOrder, TwoArmsAreAbba) {
  EXPECT_EQ(balanced_order(2, 4), (std::vector<int>{0, 1, 1, 0, 0, 1, 1, 0}));
}

TEST(BenchOracle, AcceptsOnlyIdenticalIdSequences) {
  EXPECT_TRUE(check_oracle({1, 2, 3}, {1, 2, 3}).match);
  OracleVerdict v = check_oracle({1, 2, 3}, {1, 5, 3});
  EXPECT_FALSE(v.match);
  EXPECT_EQ(v.first_difference, 1u);
  v = check_oracle({1, 2, 3}, {1, 2});  // stopped early
  EXPECT_FALSE(v.match);
  EXPECT_EQ(v.first_difference, 2u);
  EXPECT_FALSE(check_oracle({1, 2}, {1, 2, 3}).match);
}

TEST(BenchFlags, SplitLikeAShell) {
  auto f = split_flags("--prefill-chunk 512  --io 'pread' --prompt \"a b\\\"c\" x\\ y");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(*f, (std::vector<std::string>{"--prefill-chunk", "512", "--io", "pread", "--prompt", "a b\"c", "x y"}));
  EXPECT_FALSE(split_flags("--prompt 'open").ok());
  auto a = parse_arm("uring=--io uring --verify off");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->name, "uring");
  EXPECT_EQ(a->flags, (std::vector<std::string>{"--io", "uring", "--verify", "off"}));
  auto empty = parse_arm("base=");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->flags.empty());
  EXPECT_FALSE(parse_arm("=--io uring").ok());
  EXPECT_FALSE(parse_arm("noequals").ok());
  EXPECT_FALSE(parse_arm("bad name=--x").ok());
}

TEST(BenchSummary, SpreadIsMedianMinMax) {
  Spread s = spread({3, 1, 2});
  EXPECT_EQ(s.median, 2);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
  EXPECT_EQ(spread({4, 1, 3, 2}).median, 2.5);
  EXPECT_EQ(spread({}).median, 0);
}

// A crafted run: 4 MoE layers x 16 experts x 1 MiB spans, a prompt whose rows
// routed 40 distinct experts, read in prefill as 50 spans (two chunks shared
// ten experts), and 3 decode steps of 0.5 s each reading 64 spans per token.
RunRecord crafted(double step) {
  RunRecord r;
  r.source = "store", r.io_mode = "io_uring+O_DIRECT", r.cold = true;
  r.prompt_tokens = 8, r.ids = {5, 6, 7, 8};
  r.ttft_s = 2.0, r.prefill_s = 1.6;
  r.step_s = {step, step, step};
  r.unit_bytes = 1 << 20;
  r.prefill_distinct_experts = 40;
  r.prefill_read_bytes = 50ull << 20;
  r.decode_read_bytes = 3ull * 64 * (1 << 20);
  r.cold_bytes_per_token = 64ull << 20;
  return r;
}

TEST(BenchSummary, ReadAmplificationAndRooflineFromCraftedRuns) {
  const RunRecord r = crafted(0.5);
  EXPECT_DOUBLE_EQ(r.prefill_read_amplification(), 50.0 / 40.0);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s(), 2.0);
  EXPECT_DOUBLE_EQ(r.decode_read_bytes_per_token(), 64.0 * (1 << 20));

  Limits lim;
  // 64 MiB per token at 2 tokens/s is 134.2 MB/s; probes of 150 and 170 MB/s -> 160 MB/s.
  lim.disk_before = {{"/d0", "probe", 150}};
  lim.disk_after = {{"/d0", "probe", 170}};
  EXPECT_DOUBLE_EQ(lim.disk_mb_s(), 160);
  const ArmSummary a = summarize_arm("a", {crafted(0.5), crafted(0.25), crafted(1.0)}, lim);
  EXPECT_EQ(a.runs, 3);
  EXPECT_TRUE(a.cold);
  EXPECT_DOUBLE_EQ(a.decode_tok_s.median, 2.0);
  EXPECT_DOUBLE_EQ(a.decode_tok_s.min, 1.0);
  EXPECT_DOUBLE_EQ(a.decode_tok_s.max, 4.0);
  EXPECT_DOUBLE_EQ(a.prefill_read_amplification, 1.25);
  EXPECT_DOUBLE_EQ(a.prefill_tok_s.median, 5.0);
  // (64 MiB / 160 MB/s) / 0.5 s
  EXPECT_NEAR(a.roofline, (64.0 * (1 << 20) / 160e6) / 0.5, 1e-12);
  EXPECT_NE(format_summary({a}, lim).find("0.839"), std::string::npos);
}

TEST(BenchSummary, PerRunProbesGiveAPerRunRoofline) {
  // Three runs, each with its own probe after it: 64 MiB/token at 2, 4 and 1 tok/s
  // against 200, 400 and 100 MB/s -> every run's ratio is (64 MiB / probe) / step = 0.671.
  RunRecord a = crafted(0.5), b = crafted(0.25), c = crafted(1.0);
  a.disk_probe_mb_s = 200, b.disk_probe_mb_s = 400, c.disk_probe_mb_s = 100;
  Limits lim;
  lim.disk_before = {{"/d0", "probe", 1000}};
  const ArmSummary s = summarize_arm("a", {a, b, c}, lim);
  const double each = (64.0 * (1 << 20) / 200e6) / 0.5;
  EXPECT_NEAR(s.roofline, each, 1e-12);
  EXPECT_DOUBLE_EQ(s.run_probe_mb_s, 200);
  EXPECT_NEAR(s.roofline_session, (64.0 * (1 << 20) / 1000e6) / 0.5, 1e-12);
  // One run without a probe: fall back to the session's rate.
  c.disk_probe_mb_s = 0;
  EXPECT_NEAR(summarize_arm("a", {a, b, c}, lim).roofline, s.roofline_session, 1e-12);
}

TEST(BenchSummary, WarmRunsAreLabelledAndChargedTheTheoreticalColdBytes) {
  RunRecord r = crafted(0.5);
  r.cold = false, r.io_mode = "mmap", r.decode_read_bytes = 0;
  Limits lim;
  lim.disk_before = {{"/d0", "probe", 100}};
  const ArmSummary a = summarize_arm("warm", {r}, lim);
  EXPECT_FALSE(a.cold);
  EXPECT_DOUBLE_EQ(a.cold_bytes_per_token, double(64ull << 20));
  EXPECT_NE(format_summary({a}, lim).find("warm"), std::string::npos);
}

TEST(BenchRecord, JsonRoundTripAndBadInput) {
  const RunRecord r = crafted(0.5);
  auto back = RunRecord::from_json(r.to_json(), "x");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->ids, r.ids);
  EXPECT_EQ(back->step_s, r.step_s);
  EXPECT_EQ(back->prefill_read_bytes, r.prefill_read_bytes);
  EXPECT_EQ(back->to_json(), r.to_json());
  auto bad = RunRecord::from_json("{\"source\":1}", "run.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("run.json"), std::string::npos);
  EXPECT_FALSE(RunRecord::from_json("not json", "y").ok());
}

}  // namespace
}  // namespace deltafin::bench
