#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace deltafin {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int32_t argmax_of(std::span<const double> v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;  // ties keep the lower id
  return int32_t(best);
}

}  // namespace

double counter_uniform(uint64_t seed, int64_t position) {
  const uint64_t x = splitmix64(splitmix64(seed) ^ uint64_t(position));
  return double(x >> 11) * 0x1.0p-53;
}

void TokenPicker::accept(int32_t token) {
  generated_.push_back(token);
  if (p_.penalised()) ++counts_[token];
}

void TokenPicker::rewind(size_t mark) {
  while (generated_.size() > mark) {
    const int32_t t = generated_.back();
    generated_.pop_back();
    if (!p_.penalised()) continue;
    auto it = counts_.find(t);
    if (it != counts_.end() && --it->second == 0) counts_.erase(it);
  }
}

int32_t TokenPicker::pick(std::span<const float> logits, int64_t position) {
  const size_t V = logits.size();
  if (V == 0) return 0;
  if (p_.greedy() && (!p_.penalised() || counts_.empty())) {
    size_t best = 0;
    for (size_t i = 1; i < V; ++i)
      if (logits[i] > logits[best]) best = i;
    return int32_t(best);
  }
  // 1. Penalised logits, in double (NaN counts as -inf: it can never be drawn).
  s_.resize(V);
  for (size_t j = 0; j < V; ++j)
    s_[j] = std::isnan(logits[j]) ? -std::numeric_limits<double>::infinity() : double(logits[j]);
  for (const auto& [id, c] : counts_)
    if (id >= 0 && size_t(id) < V) s_[size_t(id)] -= p_.frequency_penalty * double(c) + p_.presence_penalty;
  if (p_.greedy()) return argmax_of(s_);  // 2.

  // 3. Tempered scores and their weights relative to the best.
  for (double& x : s_) x /= p_.temperature;
  const int32_t best = argmax_of(s_);
  const double m = s_[size_t(best)];
  if (!std::isfinite(m)) return best;  // every score -inf (or +inf): nothing to weigh
  w_.resize(V);
  double z_all = 0;
  for (size_t j = 0; j < V; ++j) z_all += (w_[j] = std::exp(s_[j] - m));
  auto w = [&](size_t j) { return w_[j]; };

  // 4. The cut: ranks [0, L) in descending score, ties to the lower id.
  auto before = [&](int32_t a, int32_t b) {
    return s_[size_t(a)] > s_[size_t(b)] || (s_[size_t(a)] == s_[size_t(b)] && a < b);
  };
  size_t L = V;
  if (p_.top_k > 0) L = std::min(L, size_t(p_.top_k));
  if (p_.min_p > 0) {
    size_t n = 0;
    for (size_t j = 0; j < V; ++j) n += w(j) >= p_.min_p;
    L = std::min(L, std::max<size_t>(n, 1));
  }
  const bool cut_p = p_.top_p < 1;
  if (L < V || cut_p) {
    order_.resize(V);
    for (size_t j = 0; j < V; ++j) order_[j] = int32_t(j);
  }
  if (cut_p) {
    // The shortest ranked prefix whose mass reaches top_p of the whole: sort
    // a growing head of the ranking until the prefix is found in it.
    const double need = p_.top_p * z_all;
    for (size_t head = std::min<size_t>(V, 64);; head = std::min(V, head * 8)) {
      if (head < V) std::nth_element(order_.begin(), order_.begin() + ptrdiff_t(head - 1), order_.end(), before);
      std::sort(order_.begin(), order_.begin() + ptrdiff_t(head), before);
      double acc = 0;
      size_t n = 0;
      while (n < head && acc < need) acc += w(size_t(order_[n++]));
      if (acc >= need || head == V) {
        L = std::min(L, std::max<size_t>(n, 1));
        break;
      }
    }
  }
  int32_t cut = -1;  // the last kept candidate by rank (-1: all are kept)
  if (L < V) {
    std::nth_element(order_.begin(), order_.begin() + ptrdiff_t(L - 1), order_.end(), before);
    cut = order_[L - 1];
  }
  auto kept = [&](size_t j) { return cut < 0 || !before(cut, int32_t(j)); };

  // 5. The draw, in id order over the kept candidates.
  double z = 0;
  for (size_t j = 0; j < V; ++j)
    if (kept(j)) z += w(j);
  const double target = counter_uniform(p_.seed, position) * z;
  double acc = 0;
  int32_t last = best;
  for (size_t j = 0; j < V; ++j) {
    if (!kept(j)) continue;
    acc += w(j);
    last = int32_t(j);
    if (acc > target) return last;
  }
  return last;  // rounding left the target at the very end
}

}  // namespace deltafin
