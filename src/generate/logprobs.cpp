#include "generate/logprobs.h"

#include <algorithm>
#include <cmath>

namespace deltafin {

Logprobs logprobs_of(std::span<const float> logits, int32_t chosen, int k) {
  Logprobs out;
  if (logits.empty()) return out;
  double m = double(logits[0]);
  for (float x : logits) m = std::max(m, double(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - m);
  const double lse = m + std::log(sum);
  if (chosen >= 0 && size_t(chosen) < logits.size()) out.chosen = double(logits[size_t(chosen)]) - lse;
  const size_t n = std::min(logits.size(), size_t(std::max(k, 0)));
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t j = 0; j < ids.size(); ++j) ids[j] = int32_t(j);
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.push_back({ids[i], double(logits[size_t(ids[i])]) - lse});
  return out;
}

}  // namespace deltafin
