// Block Attention Residuals (docs/design/engine.md): each row carries the finished
// block summaries (anchors, oldest first) and the running partial sum of the
// current block; layers read a softmax mix of them over depth.
#pragma once
#include <cstddef>

namespace deltafin {

// One row's anchors: `count` values and their RMS0-normalised copies (the
// keys), each `dim` floats, stored one after the other.
struct AnchorRow {
  const float* values = nullptr;
  const float* keys = nullptr;
  size_t count = 0;
};

// The most anchors a row can have (a fixed-size score array below).
inline constexpr size_t kMaxAnchors = 63;

// out = Σ_i softmax_i(s) v_i over the anchors and then `current` (whose key
// is computed here into key_scratch), with s_i = Σ_d key_i[d]·c[d] and
// c = norm_w ⊙ proj (precomputed).
void depth_mix(const AnchorRow& anchors, const float* current, const float* c, size_t dim, float eps,
               float* key_scratch, float* out);

}  // namespace deltafin
