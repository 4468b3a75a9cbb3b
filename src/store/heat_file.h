// The store's heat file, STORE/heat.json: how often each routed expert was
// requested, over past runs, with older runs fading (each run's counts are
// added to 3/4 of the previous total). Advisory: a missing, damaged or
// foreign file is ignored with a reason, never an error for a run. Bounded:
// one number per expert, whatever the number of runs. Written atomically
// (temporary file, fsync, rename), so a reader sees the old or the new file;
// two processes that save at once lose one update, which is harmless here.
// Read by the RAM tier's warm start (scores seeded from it), by
// `prepare --replicas-from STORE/heat.json` and by `doctor`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin {

inline constexpr const char* kHeatFileName = "heat.json";
inline constexpr double kHeatDecay = 0.75;

struct HeatFile {
  std::string store_id;
  int moe_layers = 0, experts = 0;
  uint64_t runs = 0;
  double weight = 0;           // sum of the runs' decay factors: counts / weight = uses per run
  std::vector<double> counts;  // [moe_index * experts + e]

  // This run's counts (same shape) folded in: counts = decay x counts + run.
  void add_run(const std::vector<uint64_t>& run);
  // Mean requests per run of key (0 without runs).
  double per_run(size_t key) const { return weight > 0 ? counts[key] / weight : 0; }
};

// `store_id`, `moe_layers`, `experts`: what the file must match.
Result<HeatFile> load_heat(const std::string& store_dir, const std::string& store_id, int moe_layers, int experts);
// Any heat file, shape from the file itself (for prepare and doctor).
Result<HeatFile> load_heat_file(const std::string& path);
Status save_heat(const std::string& store_dir, const HeatFile& h);

}  // namespace deltafin
