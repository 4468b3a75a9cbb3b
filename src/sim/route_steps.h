// A route trace as the reads it causes: `deltafin run --route-trace` writes one
// JSON line per (token position, MoE layer), {"pos":P,"layer":L,"experts":[...]}
// (and, with prefetch, guess lines {"pos":P,"layer":L,"rows":T,"guess":[...]},
// skipped here; src/sim/trace_stats.h reads them).
// Positions before `prompt_tokens` form one prefill block (per layer, the
// union of their experts, read once); later positions are decode steps of
// `verify_block` consecutive positions each (1: one token a step; K: a
// drafting verify block of K rows that all pass, whose per-layer union is read
// once), the last one possibly shorter.
#pragma once
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin::sim {

struct RouteStep {
  int first_pos = 0;
  int tokens = 1;  // positions covered
  bool prefill = false;
  std::vector<std::vector<int>> experts;  // [moe_index]: ascending, distinct (the union forward(rows) fetches)
};

struct RouteTrace {
  std::vector<int> layers;  // model layer numbers seen, ascending
  std::vector<RouteStep> steps;
  int positions = 0;
};

// `moe_layers`: the model's MoE layer numbers (ascending); empty: the layers
// the trace names, at most `max_moe_layers` of them. Expert ids must be below
// `experts`. Errors name the file and line.
Result<RouteTrace> read_route_steps(const std::string& path, const std::vector<int>& moe_layers, int max_moe_layers,
                                    int experts, int prompt_tokens, int verify_block = 1);

}  // namespace deltafin::sim
