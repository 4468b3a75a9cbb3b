// `deltafin trace-stats --trace FILE [--experts E] [--prompt-tokens P]
//   [--union K,...] [--ram-slots N,...] [--ram-share F,...] [--json OUT]`:
// what a route trace says about the routing (persistence, prefetch recall,
// popularity skew, union sizes) and the RAM tier's policy against Belady's
// optimum on it (docs/guide/drives-and-ram-tier.md).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "sim/trace_stats.h"

namespace deltafin::cli {

namespace {

struct TraceStatsArgs {
  std::string trace, json_out;
  int experts = 0, prompt_tokens = 0;
  uint64_t age_every = 0;
  int64_t window = -1;
  std::vector<int> unions = {1, 2, 4, 8, 16, 32};
  std::vector<uint64_t> slots;
  std::vector<double> shares;
};

std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

int run(const TraceStatsArgs& a) {
  auto t = sim::read_trace_routes(a.trace, a.experts);
  if (!t.ok()) return fail(t.message());
  const uint64_t all = uint64_t(t->layers.size()) * uint64_t(t->experts);
  std::vector<uint64_t> slots = a.slots;
  for (double f : a.shares) slots.push_back(uint64_t(std::llround(f * double(all))));
  const sim::TraceStats s = sim::trace_stats(*t, a.unions, slots, a.prompt_tokens, a.age_every,
                                                a.window < 0 ? kDefaultWindow : size_t(a.window));
  std::printf("trace: %d positions x %d MoE layers, %.2f experts per position and layer, %d experts per layer\n",
              s.positions, s.layers, s.per_position, t->experts);
  std::printf("persistence: %s of a position's experts were the previous position's too (%llu pairs)\n",
              pct(s.persistence).c_str(), (unsigned long long)s.persistence_pairs);
  if (s.guess_blocks) {
    std::string by;
    for (size_t m = 0; m < s.guess_recall_by_layer.size(); ++m)
      if (s.guess_recall_by_layer[m] >= 0) by += fmt::format(" L{} {}", t->layers[m], pct(s.guess_recall_by_layer[m]));
    std::printf("prefetch guesses: recall %s, precision %s over %llu blocks; recall by guessed layer:%s\n",
                pct(s.guess_recall).c_str(), pct(s.guess_precision).c_str(), (unsigned long long)s.guess_blocks,
                by.c_str());
  } else {
    std::printf("prefetch guesses: none in the trace (run with --prefetch N and --route-trace)\n");
  }
  std::printf("popularity: most-routed expert / median expert, per layer: median %.2fx (min %.2fx, max %.2fx); "
              "each layer's top 10%% of experts took %s of routes\n",
              s.skew_median, s.skew_min, s.skew_max, pct(s.top_tenth_share).c_str());
  std::string u;
  for (const auto& x : s.unions) u += fmt::format("{}k={} {:.2f} ({})", u.empty() ? "" : ", ", x.k, x.mean, pct(x.of_routed));
  std::printf("union of k consecutive positions per layer (share of k x routed): %s\n", u.c_str());
  for (const auto& r : s.tiers) {
    const double ratio = r.belady_hits ? double(r.policy_hits) / double(r.belady_hits) : 0;
    const double dp = r.decode_requests ? double(r.decode_policy_hits) / double(r.decode_requests) : 0;
    const double db = r.decode_requests ? double(r.decode_belady_hits) / double(r.decode_requests) : 0;
    std::printf("ram tier %llu slots (%s of experts): policy %s of %llu requests from RAM, Belady %s -> %s of the "
                "optimum; hindsight static top-%llu %s (%s of the optimum); decode only: policy %s, Belady %s\n",
                (unsigned long long)r.slots, pct(all ? double(r.slots) / double(all) : 0).c_str(),
                pct(r.policy_rate()).c_str(), (unsigned long long)r.requests, pct(r.belady_rate()).c_str(),
                pct(ratio).c_str(), (unsigned long long)r.slots, pct(r.static_rate()).c_str(),
                pct(r.belady_hits ? double(r.static_hits) / double(r.belady_hits) : 0).c_str(), pct(dp).c_str(),
                pct(db).c_str());
  }
  if (!a.json_out.empty()) {
    nlohmann::ordered_json j = {{"positions", s.positions},
                                {"layers", s.layers},
                                {"experts", t->experts},
                                {"per_position", s.per_position},
                                {"persistence", s.persistence},
                                {"persistence_pairs", s.persistence_pairs},
                                {"guess_blocks", s.guess_blocks},
                                {"guess_recall", s.guess_recall},
                                {"guess_precision", s.guess_precision},
                                {"guess_recall_by_layer", s.guess_recall_by_layer},
                                {"skew_by_layer", s.skew_by_layer},
                                {"skew_median", s.skew_median},
                                {"top_tenth_share", s.top_tenth_share}};
    for (const auto& x : s.unions) j["unions"].push_back({{"k", x.k}, {"mean", x.mean}, {"of_routed", x.of_routed}});
    for (const auto& r : s.tiers)
      j["tiers"].push_back({{"slots", r.slots},
                            {"requests", r.requests},
                            {"policy_hits", r.policy_hits},
                            {"belady_hits", r.belady_hits},
                            {"static_hits", r.static_hits},
                            {"decode_requests", r.decode_requests},
                            {"decode_policy_hits", r.decode_policy_hits},
                            {"decode_belady_hits", r.decode_belady_hits},
                            {"decode_static_hits", r.decode_static_hits}});
    std::ofstream f(a.json_out);
    f << j.dump(2) << "\n";
    if (!f.good()) return fail(fmt::format("{}: write failed", a.json_out));
  }
  return 0;
}

void setup(CLI::App& root) {
  auto* cmd = root.add_subcommand("trace-stats",
                                  "Routing statistics of a route trace, and the RAM tier's policy against Belady's "
                                  "optimum on it (docs/guide/drives-and-ram-tier.md)");
  set_example(cmd, "deltafin trace-stats --trace /tmp/route.jsonl --prompt-tokens 8 --ram-share 0.1,0.25,0.5");
  static TraceStatsArgs a;
  cmd->add_option("--trace", a.trace, "Route trace from `run --route-trace` (JSON lines)")->required();
  cmd->add_option("--experts", a.experts, "Experts per MoE layer (0: the largest id seen + 1)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--prompt-tokens", a.prompt_tokens,
                  "Positions below P were one prefill block (the tier sees their union once per layer)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--union", a.unions, "Window sizes k for the union of k consecutive positions")->delimiter(',');
  cmd->add_option("--ram-slots", a.slots, "Replay the RAM tier with this many expert slots (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--ram-share", a.shares, "... or with this share of all experts (comma-separated, 0-1)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--ram-age-every", a.age_every,
                  "The tier policy's ageing period: scores halve every N requests (0: 8 x slots, at least 1024)");
  cmd->add_option("--ram-window", a.window,
                  "The tier policy's recency window in slots (-1: three tokens' requests, at most half the slots, none if one token's are over half; 0: frequency only)")
      ->check(CLI::Range(int64_t(-1), int64_t(1) << 40));
  cmd->add_option("--json", a.json_out, "Write the statistics as JSON to this file");
  cmd->callback([] { set_exit_code(run(a)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
