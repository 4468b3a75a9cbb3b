// How one routed expert's bytes lie back to back in a store span (and in the
// payload prepare copies): w1 weight, w1 scales, w2 weight, w2 scales, w3
// weight, w3 scales, each record's size from the config's expert format (no
// scale records for BF16). MXFP4 is the layout stores have always had.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "model/config.h"
#include "model/expert_source.h"

namespace deltafin {

struct ExpertLayout {
  uint64_t offset[6] = {}, bytes[6] = {};  // w1, w1 scales, w2, w2 scales, w3, w3 scales
  uint64_t total = 0;
};

ExpertLayout expert_layout(const ModelConfig& cfg);

// Record k's matrix as the families name them (ExpertTensorNames: gate, up,
// down): records run w1 (gate), w2 (down), w3 (up).
inline int record_name_part(int k) { return k / 2 == 0 ? 0 : k / 2 == 1 ? 2 : 1; }

// Views of the expert whose payload starts at `base`.
ExpertWeights expert_views(const ExpertLayout& layout, const uint8_t* base);

// The format's checks on a payload read from a drive or a checkpoint: MXFP4
// scale bytes (255 is NaN), FP8 codes (NaN) and block scales (finite, > 0).
// The message names the layer, expert and part.
Status check_expert_payload(const ModelConfig& cfg, const ExpertLayout& layout, const uint8_t* base, int layer,
                            int expert);

// The manifest's name of an expert format ("mxfp4", "bf16", "fp8_block") and back.
std::string_view expert_format_name(ExpertFormat f);
Result<ExpertFormat> expert_format_from_name(std::string_view name);

}  // namespace deltafin
