// Where each expert goes: primaries spread over drives in proportion to their
// read rates (smooth weighted round robin, so every layer is split the same
// way), then replicas of the hottest experts, each on the drive other than the
// primary that would finish soonest given the bytes of the same MoE layer
// already placed there (a layer waits for its busiest drive, so the balance
// must hold per layer; ties spread copies over all pairs of drives).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "store/manifest.h"

namespace deltafin {

struct PlacementPlan {
  // [drive][moe_index]: expert ids in file order (sorted), primaries and replicas.
  std::vector<std::vector<std::vector<int>>> files;
  // [moe_index * experts + e]: drive of each copy, primary first.
  std::vector<std::vector<int>> copies;
};

// hot: (moe_index, expert) pairs in replication order; the first `replicas`
// get a second copy. Fails if replicas > 0 with fewer than two drives.
Result<PlacementPlan> plan_placement(int moe_layers, int experts, uint64_t span_bytes, const std::vector<double>& rates,
                                     const std::vector<std::pair<int, int>>& hot, uint64_t replicas);

// A route trace: text, one "LAYER EXPERT [COUNT]" per line (COUNT defaults to
// 1, repeated pairs add up; '#' starts a comment), or the JSON lines `run
// --route-trace` writes ({"pos":P,"layer":L,"experts":[...]}: each id counts 1). Returns (moe_index, expert)
// pairs by descending count, ties by (layer, expert); pairs never routed are
// left out. Errors name the file and line.
Result<std::vector<std::pair<int, int>>> read_route_trace(const std::string& path, const std::vector<int>& moe_layers,
                                                          int experts);

// Without a trace: every expert, interleaving layers (expert 0 of every layer,
// then expert 1, ...), so a count N replicates about N / layers per layer.
std::vector<std::pair<int, int>> default_hot_order(int moe_layers, int experts);

struct ReplicaSelection {
  std::vector<std::pair<int, int>> hot;  // (moe_index, expert) in replication order
  uint64_t replicas = 0;                 // how many of them get a second copy
};

// prepare's choice: with `replicas_from` (a route trace), the routed experts by
// heat; else, with `replicate_hot` set, default_hot_order. `replicate_hot` is
// a count or "all" (empty: none unless a trace is given) and caps the number.
Result<ReplicaSelection> select_replicas(const std::string& replicate_hot, const std::string& replicas_from,
                                         const std::vector<int>& moe_layers, int experts);

}  // namespace deltafin
