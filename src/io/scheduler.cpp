#include "io/scheduler.h"

#include <algorithm>

namespace deltafin::io {

double finish_estimate(uint64_t inflight_bytes, uint64_t span, double rate) {
  return double(inflight_bytes + span) / std::max(rate, 1.0);
}

int pick_replica(std::span<const ReplicaLoad> loads, uint64_t span) {
  int best = -1;
  double best_eta = 0;
  for (size_t r = 0; r < loads.size(); ++r) {
    const double e = finish_estimate(loads[r].inflight_bytes, span, loads[r].rate);
    if (best < 0 || e < best_eta) best = int(r), best_eta = e;
  }
  return best;
}

bool should_split(size_t usable_replicas, uint64_t span, uint64_t split_min) {
  return usable_replicas >= 2 && span >= split_min;
}

std::vector<SplitPiece> split_by_rate(uint64_t span, std::span<const double> rates) {
  std::vector<SplitPiece> out;
  double total = 0;
  for (double r : rates) total += std::max(r, 1.0);
  uint64_t begin = 0;
  double acc = 0;
  for (size_t i = 0; i < rates.size(); ++i) {
    acc += std::max(rates[i], 1.0);
    const uint64_t end =
        i + 1 == rates.size() ? span : std::min<uint64_t>(span, uint64_t(double(span) * acc / total) / 4096 * 4096);
    if (end <= begin) continue;
    out.push_back({i, begin, end - begin});
    begin = end;
  }
  return out;
}

std::optional<Purpose> admit_next(const DriveSlots& s) {
  if (s.inflight_demand + s.inflight_prefetch >= s.depth) return std::nullopt;
  if (s.demand_queued) return Purpose::Demand;
  if (s.prefetch_queued && s.inflight_prefetch < std::min(s.prefetch_depth, s.depth - 1 > 0 ? s.depth - 1 : 1))
    return Purpose::Prefetch;
  return std::nullopt;
}

int drive_depth(bool uring, int queue_depth, int pread_threads) {
  return uring ? queue_depth : std::min(queue_depth, std::max(pread_threads, 1));
}

void RateEstimator::observe(double busy_seconds, uint64_t total_bytes) {
  if (busy_seconds - window_busy0 >= 0.02 && total_bytes - window_bytes0 >= (4u << 20)) {
    const double sample = double(total_bytes - window_bytes0) / (busy_seconds - window_busy0);
    rate = 0.65 * rate + 0.35 * sample;
    window_busy0 = busy_seconds;
    window_bytes0 = total_bytes;
  }
}

}  // namespace deltafin::io
