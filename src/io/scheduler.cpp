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

std::vector<SplitPiece> split_by_eta(uint64_t span, std::span<const ReplicaLoad> loads) {
  std::vector<SplitPiece> out;
  if (loads.empty()) return out;
  // Finish time T with sum over replicas of max(0, T * rate - inflight) = span:
  // fill from the replica that frees up first.
  std::vector<size_t> order(loads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto rate = [&](size_t i) { return std::max(loads[i].rate, 1.0); };
  auto start = [&](size_t i) { return double(loads[i].inflight_bytes) / rate(i); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return start(a) < start(b); });
  double rate_sum = 0, inflight_sum = 0, finish = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    rate_sum += rate(order[k]);
    inflight_sum += double(loads[order[k]].inflight_bytes);
    finish = (double(span) + inflight_sum) / rate_sum;
    if (k + 1 == order.size() || finish <= start(order[k + 1])) break;
  }
  uint64_t begin = 0;
  double acc = 0;
  size_t last = 0;  // the last replica with a positive share
  for (size_t i = 0; i < loads.size(); ++i)
    if (finish * rate(i) - double(loads[i].inflight_bytes) > 0) last = i;
  for (size_t i = 0; i <= last; ++i) {
    acc += std::max(0.0, finish * rate(i) - double(loads[i].inflight_bytes));
    const uint64_t end = i == last ? span : std::min<uint64_t>(span, uint64_t(std::max(acc, 0.0)) / 4096 * 4096);
    if (end <= begin) continue;
    out.push_back({i, begin, end - begin});
    begin = end;
  }
  return out;
}

namespace {

// Finish times sorted from the latest, compared lexicographically.
bool later_first_less(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end(), std::greater<>());
  std::sort(b.begin(), b.end(), std::greater<>());
  return a < b;
}

}  // namespace

std::vector<int> assign_replicas(std::span<const BatchRead> reads, std::span<const ReplicaLoad> drives) {
  const size_t D = drives.size();
  std::vector<double> bytes(D);
  for (size_t d = 0; d < D; ++d) bytes[d] = double(drives[d].inflight_bytes);
  auto rate = [&](size_t d) { return std::max(drives[d].rate, 1.0); };
  auto finish = [&](const std::vector<double>& b) {
    std::vector<double> f(D);
    for (size_t d = 0; d < D; ++d) f[d] = b[d] / rate(d);
    return f;
  };
  std::vector<int> pick(reads.size(), -1), on(reads.size(), -1);  // replica index, and its drive
  for (size_t r = 0; r < reads.size(); ++r) {
    std::vector<ReplicaLoad> loads;
    for (int d : reads[r].drives) loads.push_back({uint64_t(bytes[size_t(d)]), drives[size_t(d)].rate});
    pick[r] = pick_replica(loads, reads[r].span);
    if (pick[r] < 0) continue;
    on[r] = reads[r].drives[size_t(pick[r])];
    bytes[size_t(on[r])] += double(reads[r].span);
  }
  // Chains from the busiest drive, breadth first; each accepted chain makes the
  // sorted finish times strictly smaller, so this ends (capped all the same).
  for (size_t round = 0; round < 4 * reads.size() + 4; ++round) {
    const std::vector<double> now = finish(bytes);
    const size_t from = size_t(std::max_element(now.begin(), now.end()) - now.begin());
    std::vector<std::pair<int, int>> via(D, {-1, -1});  // [drive]: (read moved onto it, its replica index)
    std::vector<char> seen(D, 0);
    std::vector<size_t> frontier = {from};
    seen[from] = 1;
    bool moved = false;
    for (size_t at = 0; at < frontier.size() && !moved; ++at) {
      const size_t u = frontier[at];
      for (size_t r = 0; r < reads.size() && !moved; ++r) {
        if (on[r] != int(u)) continue;
        for (size_t k = 0; k < reads[r].drives.size() && !moved; ++k) {
          const size_t v = size_t(reads[r].drives[k]);
          if (seen[v]) continue;
          seen[v] = 1;
          via[v] = {int(r), int(k)};
          frontier.push_back(v);
          // Try the chain from -> ... -> v.
          std::vector<double> next = bytes;
          for (size_t w = v; w != from;) {
            const size_t rr = size_t(via[w].first);
            next[w] += double(reads[rr].span);
            next[size_t(on[rr])] -= double(reads[rr].span);
            w = size_t(on[rr]);
          }
          if (!later_first_less(finish(next), now)) continue;
          for (size_t w = v; w != from;) {
            const size_t rr = size_t(via[w].first);
            const size_t prev = size_t(on[rr]);
            pick[rr] = via[w].second;
            on[rr] = int(w);
            w = prev;
          }
          bytes = next;
          moved = true;
        }
      }
    }
    if (!moved) break;
  }
  return pick;
}

std::vector<std::vector<SplitPiece>> plan_batch(std::span<const BatchRead> reads, std::span<const ReplicaLoad> drives,
                                                uint64_t split_min) {
  std::vector<ReplicaLoad> loads(drives.begin(), drives.end());
  std::vector<std::vector<SplitPiece>> out(reads.size());
  std::vector<size_t> whole;
  std::vector<BatchRead> batch;
  for (size_t r = 0; r < reads.size(); ++r) {
    if (!should_split(reads[r].drives.size(), reads[r].span, split_min)) {
      whole.push_back(r);
      batch.push_back(reads[r]);
      continue;
    }
    std::vector<ReplicaLoad> mine;
    for (int d : reads[r].drives) mine.push_back(loads[size_t(d)]);
    out[r] = split_by_eta(reads[r].span, mine);
    for (const SplitPiece& p : out[r]) loads[size_t(reads[r].drives[p.replica])].inflight_bytes += p.length;
  }
  const std::vector<int> pick = assign_replicas(batch, loads);
  for (size_t i = 0; i < whole.size(); ++i)
    if (pick[i] >= 0) out[whole[i]].push_back({size_t(pick[i]), 0, reads[whole[i]].span});
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
