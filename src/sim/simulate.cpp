#include "sim/simulate.h"

#include <memory>

#include "store/placement.h"
#include "store/tier_policy.h"

namespace deltafin::sim {

double SimReport::per_token_s() const {
  if (decode_tokens > 0) return decode_s / decode_tokens;
  return tokens > 0 ? total_s / tokens : 0;
}

Result<SimReport> simulate(const SimOptions& opts, const SimWorkload& w) {
  if (w.moe_layers < 1 || w.experts < 1) return error("simulator: no MoE layers or experts");
  if (w.span == 0) return error("simulator: the expert span is 0 bytes");
  if (w.copies.size() != size_t(w.moe_layers) * size_t(w.experts))
    return error("simulator: placement covers {} experts, expected {} x {}", w.copies.size(), w.moe_layers, w.experts);
  DF_ASSIGN(DriveSim ds, DriveSim::create(opts));
  SimReport rep;
  std::vector<SimRead> reads;
  std::unique_ptr<TierGroups> tier;
  if (w.ram_slots > 0) {
    // The window is sized from one token's requests: the smallest step's (a prefill block's union is larger).
    size_t per_token = 0;
    for (const RouteStep& step : w.steps) {
      size_t n = 0;
      for (const auto& ex : step.experts) n += ex.size();
      if (n > 0 && (per_token == 0 || n < per_token)) per_token = n;
    }
    tier = std::make_unique<TierGroups>(size_t(w.moe_layers) * size_t(w.experts), size_t(w.ram_slots), 0,
                                        tier_window(size_t(w.ram_slots), per_token));
  }
  std::vector<int> keys, misses;
  for (const RouteStep& step : w.steps) {
    if (step.experts.size() > size_t(w.moe_layers))
      return error("simulator: a step names {} MoE layers, the model has {}", step.experts.size(), w.moe_layers);
    const double t0 = ds.now();
    const uint64_t bytes0 = rep.bytes;
    for (size_t m = 0; m < step.experts.size(); ++m) {
      reads.clear();
      keys.clear();
      for (int e : step.experts[m]) {
        if (e < 0 || e >= w.experts) return error("simulator: expert {} is out of range (0..{})", e, w.experts - 1);
        keys.push_back(int(m) * w.experts + e);
      }
      if (tier) tier->run(keys, &misses);
      for (int k : tier ? misses : keys) reads.push_back({w.copies[size_t(k)], w.span, io::Purpose::Demand});
      DF_TRY(ds.run_batch(reads));
      ds.idle(w.compute_s_per_layer);
      rep.reads += reads.size();
      rep.bytes += reads.size() * w.span;
    }
    const double dt = ds.now() - t0;
    rep.steps.push_back({step.first_pos, step.tokens, step.prefill, dt, rep.bytes - bytes0});
    rep.tokens += step.tokens;
    if (step.prefill)
      rep.prefill_s += dt, rep.prefill_tokens += step.tokens;
    else
      rep.decode_s += dt, rep.decode_steps++, rep.decode_tokens += step.tokens;
  }
  if (tier) rep.ram_requests = tier->requests, rep.ram_hits = tier->hits;
  rep.total_s = ds.now();
  rep.drives = ds.stats();
  rep.split_reads = ds.split_reads();
  return rep;
}

Result<std::vector<std::vector<int>>> planned_copies(int moe_layers, int experts, uint64_t span,
                                                     const std::vector<double>& rates_mb_s,
                                                     const std::vector<std::pair<int, int>>& hot, uint64_t replicas) {
  DF_ASSIGN(PlacementPlan plan, plan_placement(moe_layers, experts, span, rates_mb_s, hot, replicas));
  return std::move(plan.copies);
}

Result<std::vector<LadderRung>> drive_ladder(int max_drives, const SimOptions& base,
                                             const std::vector<DriveModel>& models, SimWorkload w,
                                             const std::vector<std::pair<int, int>>& hot, uint64_t replicas) {
  if (max_drives < 1) return error("--ladder must be >= 1");
  if (models.empty()) return error("simulator: no drive model for the ladder");
  std::vector<LadderRung> out;
  for (int k = 1; k <= max_drives; ++k) {
    SimOptions o = base;
    o.drives.clear();
    o.rate_estimates_mb_s.clear();
    std::vector<double> rates;
    for (int i = 0; i < k; ++i)
      o.drives.push_back(models[size_t(i) % models.size()]), rates.push_back(o.drives.back().mb_s);
    DF_ASSIGN(w.copies, planned_copies(w.moe_layers, w.experts, w.span, rates, hot, k >= 2 ? replicas : 0));
    DF_ASSIGN(SimReport r, simulate(o, w));
    LadderRung rung{k, r.per_token_s(), r.total_s, 0};
    rung.speedup = out.empty() ? 1.0 : rung.per_token_s > 0 ? out.front().per_token_s / rung.per_token_s : 0.0;
    out.push_back(rung);
  }
  return out;
}

}  // namespace deltafin::sim
