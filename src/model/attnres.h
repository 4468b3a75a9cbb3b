// Block Attention Residuals (spec §2.3): each row carries the finished block
// summaries (anchors, oldest first) and the running partial sum of the current
// block; layers read a softmax mix of them over depth.
#pragma once
#include <cstddef>
#include <vector>

namespace deltafin {

struct DepthValues {
  // Anchors of one row: values and their RMS0-normalised copies (the keys).
  std::vector<const float*> values, keys;
};

// out = Σ_i softmax_i(s) v_i with s_i = Σ_d key_i[d]·c[d]; the last value is
// `current` whose key is computed here. c = norm_w ⊙ proj (precomputed).
void depth_mix(const std::vector<const float*>& anchor_values, const std::vector<const float*>& anchor_keys,
               const float* current, const float* c, size_t n, float eps, float* key_scratch, float* out);

}  // namespace deltafin
