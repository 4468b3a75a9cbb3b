// What a route trace (`deltafin run --route-trace`) says about the routing:
// the statistics that decide how much a RAM tier, prefetch and batching can
// save, measured rather than assumed, and the RAM tier's policy replayed on
// the trace next to the offline optimum (Belady) for the same capacity.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/tier_policy.h"

namespace deltafin::sim {

struct TraceRoutes {
  std::vector<int> layers;  // MoE layer numbers seen, ascending
  int experts = 0;          // largest expert id seen + 1 (or given)
  // [position][moe_index]: the routed experts (distinct, ascending; empty where missing).
  std::vector<int> positions;  // ascending
  std::vector<std::vector<std::vector<int>>> routes;
  struct Guess {
    int pos = 0, rows = 1, moe_index = 0;
    std::vector<int> experts;  // distinct, ascending
  };
  std::vector<Guess> guesses;
};

// Reads route lines {"pos","layer","experts"} and guess lines {"pos","layer","rows","guess"}.
// `experts` > 0 bounds the ids (errors name file and line); 0: inferred.
Result<TraceRoutes> read_trace_routes(const std::string& path, int experts);

struct UnionSize {
  int k = 0;            // consecutive positions
  double mean = 0;      // distinct experts per layer over k positions (non-overlapping windows)
  double of_routed = 0; // mean / (k x experts per position)
};

struct TierReplay {
  uint64_t slots = 0;
  uint64_t requests = 0, policy_hits = 0, belady_hits = 0;
  uint64_t decode_requests = 0, decode_policy_hits = 0, decode_belady_hits = 0;
  // The trace's `slots` most-requested experts, each kept from its first use on.
  uint64_t static_hits = 0, decode_static_hits = 0;
  double policy_rate() const { return requests ? double(policy_hits) / double(requests) : 0; }
  double belady_rate() const { return requests ? double(belady_hits) / double(requests) : 0; }
  double static_rate() const { return requests ? double(static_hits) / double(requests) : 0; }
};

struct TraceStats {
  int positions = 0, layers = 0;
  double per_position = 0;  // routed experts per (position, layer), mean
  // Of a position's experts at a layer, the share the previous position also had there.
  double persistence = 0;
  uint64_t persistence_pairs = 0;
  // Prefetch guesses: share of the guessed layer's routed experts (its block's union)
  // that were guessed (recall), and of the guesses that were routed (precision).
  double guess_recall = 0, guess_precision = 0;
  uint64_t guess_blocks = 0;
  std::vector<double> guess_recall_by_layer;  // [moe_index]; -1 where no guess
  // Per layer: the most-routed expert's count over the median expert's count
  // (over all `experts`, zeros included; the mean where the median is 0).
  std::vector<double> skew_by_layer;
  double skew_median = 0, skew_min = 0, skew_max = 0;
  double top_tenth_share = 0;  // share of all routes that went to each layer's top 10 % of experts
  std::vector<UnionSize> unions;
  std::vector<TierReplay> tiers;
};

// Groups for the tier: positions below `prompt_tokens` as one block (per
// layer the union, requested once, as forward(rows) does), then one group per
// position and layer; keys are moe_index x experts + id.
std::vector<std::vector<int>> tier_requests(const TraceRoutes& t, int prompt_tokens, size_t* prefill_groups);

// TierPolicy (src/store/tier_policy.h) on the groups as the store's tier runs
// it (every request of a group looked up, then its misses admitted, fills
// published at the group's end), and Belady's optimum with bypass (on a miss,
// of the residents and the newcomer keep those used again soonest; it ignores
// pins, so it is an upper bound). `prefill_groups`: the first groups, left out
// of the decode counts.
TierReplay replay_tier(const std::vector<std::vector<int>>& groups, size_t keys, size_t slots, size_t prefill_groups,
                       uint64_t age_every = 0, size_t window = kDefaultWindow);

// age_every, window: TierPolicy's ageing period and recency window for the
// tier replays (0 / kDefaultWindow: its defaults).
TraceStats trace_stats(const TraceRoutes& t, const std::vector<int>& union_ks, const std::vector<uint64_t>& tier_slots,
                       int prompt_tokens, uint64_t age_every = 0, size_t window = kDefaultWindow);

}  // namespace deltafin::sim
