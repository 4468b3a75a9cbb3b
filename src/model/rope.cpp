#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace deltafin {

std::vector<double> rope_inv_freq(double theta, int dim, const YarnParams* yarn) {
  const int half = dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) inv[size_t(i)] = std::pow(theta, -2.0 * i / dim);
  if (!yarn || yarn->factor <= 1 || yarn->original_max_positions <= 0) return inv;
  auto corr = [&](double rot) {
    return dim * std::log(yarn->original_max_positions / (rot * 2 * std::numbers::pi)) / (2 * std::log(theta));
  };
  double low = corr(yarn->beta_fast), high = corr(yarn->beta_slow);
  if (yarn->truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, double(dim - 1));
  if (high == low) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extra = inv[size_t(i)];
    inv[size_t(i)] = extra * (1 - ramp) + extra / yarn->factor * ramp;
  }
  return inv;
}

double yarn_mscale(double factor, double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

}  // namespace deltafin
