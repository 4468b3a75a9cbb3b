#include "model/guess_depth.h"

#include <algorithm>
#include <cmath>

namespace deltafin {

GuessDepth::GuessDepth(int layers, int max_per_row, double min_precision, int initial, int half_life)
    : max_(std::max(0, max_per_row)),
      min_precision_(min_precision),
      keep_(std::pow(0.5, 1.0 / std::max(1, half_life))),
      routed_(size_t(std::max(0, layers)) * size_t(max_), 0.0),
      scored_(size_t(std::max(0, layers)) * size_t(max_), 0.0),
      count_(size_t(std::max(0, layers)), std::clamp(initial, 0, max_)) {}

void GuessDepth::score(int layer, std::span<const int> ranked, std::span<const int> routed) {
  const size_t n = std::min(ranked.size(), size_t(max_));
  double* hit = routed_.data() + size_t(layer) * size_t(max_);
  double* seen = scored_.data() + size_t(layer) * size_t(max_);
  for (size_t r = 0; r < n; ++r) {
    const bool used = std::find(routed.begin(), routed.end(), ranked[r]) != routed.end();
    hit[r] = hit[r] * keep_ + (used ? 1.0 : 0.0);
    seen[r] = seen[r] * keep_ + 1.0;
  }
  // Counted, not a prefix: one noisy rank does not cut off the good ones after it.
  int count = 0;
  for (size_t r = 0; r < size_t(max_); ++r)
    if (seen[r] > 0 && hit[r] >= min_precision_ * seen[r]) ++count;
  count_[size_t(layer)] = count;
}

}  // namespace deltafin
