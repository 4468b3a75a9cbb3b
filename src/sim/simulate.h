// Replays a route trace on simulated drives: per step (a decode token, or the
// prefill block), each MoE layer in order submits all its experts' reads at
// once and completes when the last read completes (as StoreExpertSource::
// acquire does), plus an optional compute time per layer.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/result.h"
#include "sim/drive_sim.h"
#include "sim/route_steps.h"

namespace deltafin::sim {

struct SimWorkload {
  int moe_layers = 0, experts = 0;
  uint64_t span = 0;                     // bytes read per expert
  std::vector<std::vector<int>> copies;  // [moe_index * experts + e]: drives holding it, primary first
  std::vector<RouteStep> steps;
  double compute_s_per_layer = 0;
  // RAM tier slots (0: none): the store's policy (TierGroups) decides which
  // experts are served from RAM; only the misses are read from the drives.
  uint64_t ram_slots = 0;
};

struct StepTime {
  int first_pos = 0, tokens = 1;
  bool prefill = false;
  double seconds = 0;
  uint64_t bytes = 0;
};

struct SimReport {
  std::vector<StepTime> steps;
  double total_s = 0, prefill_s = 0, decode_s = 0;
  int tokens = 0, prefill_tokens = 0, decode_steps = 0, decode_tokens = 0;
  uint64_t bytes = 0, reads = 0;  // expert reads (a split read counts once)
  uint64_t split_reads = 0;
  uint64_t ram_requests = 0, ram_hits = 0;  // with a RAM tier
  std::vector<SimDriveStats> drives;
  // Mean seconds per decode token (a verify block's time spread over its rows);
  // total / tokens when there is no decode step.
  double per_token_s() const;
};

Result<SimReport> simulate(const SimOptions& opts, const SimWorkload& w);

// The copies prepare's plan_placement makes for these drive rates (MB/s).
Result<std::vector<std::vector<int>>> planned_copies(int moe_layers, int experts, uint64_t span,
                                                     const std::vector<double>& rates_mb_s,
                                                     const std::vector<std::pair<int, int>>& hot, uint64_t replicas);

struct LadderRung {
  int drives = 0;
  double per_token_s = 0, total_s = 0;
  double speedup = 0;  // rung 1's per_token_s / this one's
};

// Rungs 1..max_drives: rung k has drives models[i % models.size()] for i < k
// (the link and scheduler options of `base`), with the placement prepare would
// plan for them (replicas from `hot`/`replicas` from 2 drives on).
Result<std::vector<LadderRung>> drive_ladder(int max_drives, const SimOptions& base,
                                             const std::vector<DriveModel>& models, SimWorkload w,
                                             const std::vector<std::pair<int, int>>& hot, uint64_t replicas);

}  // namespace deltafin::sim
