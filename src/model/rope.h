// Rotary position embedding frequencies, shared by every attention block
// that rotates (Qwen3's GQA, DSpark's MLA): theta^(-2i/dim) per rotated pair,
// or YaRN's blend with the interpolated theta^(-2i/dim) / factor over a
// linear ramp between the correction dimensions of beta_fast and beta_slow
// (transformers' _compute_yarn_parameters), in double.
#pragma once
#include <vector>

namespace deltafin {

struct YarnParams {
  double factor = 1;                  // <= 1: no YaRN
  double original_max_positions = 0;  // the context the model was trained at
  double beta_fast = 32, beta_slow = 1;
  bool truncate = true;               // correction dimensions floored / ceiled
};

// dim/2 inverse frequencies; yarn may be null (plain RoPE).
std::vector<double> rope_inv_freq(double theta, int dim, const YarnParams* yarn);

// YaRN's mscale(f, m): 1 for f <= 1, else 0.1 m ln f + 1.
double yarn_mscale(double factor, double m);

}  // namespace deltafin
