// Synthetic route traces with chosen statistics, for the simulator at shapes
// no test model has (the real K3: 92 MoE layers x 896 experts): per layer a
// fixed popularity (weights exp(skew x Exp(1)) per expert), and token-to-token
// persistence (each of the previous position's experts is kept with
// probability `keep`; the rest are drawn by popularity, without repeats).
// `deltafin make-trace` writes them in `run --route-trace`'s format, so
// trace-stats measures what they actually show.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin::sim {

struct RouteGenOptions {
  int moe_layers = 0, experts = 0, top_k = 0, positions = 0;
  int first_layer = 1;  // layer number of the first MoE layer (the trace names layers first_layer..)
  double keep = 0;      // 0-1
  double skew = 0;      // >= 0
  uint64_t seed = 1;
};

// [position][moe_index] -> experts (distinct, in draw order).
Result<std::vector<std::vector<std::vector<int>>>> generate_routes(const RouteGenOptions& o);
Status write_route_trace(const std::string& path, const RouteGenOptions& o,
                         const std::vector<std::vector<std::vector<int>>>& routes);

}  // namespace deltafin::sim
