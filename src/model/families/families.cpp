#include "model/families/families.h"

#include "model/weights.h"

namespace deltafin {

const std::vector<FamilyEntry>& model_families() {
  static const std::vector<FamilyEntry> table = {
      {"kimi_k3", Family::KimiK3, parse_kimi_k3, bind_kimi_k3, kimi_k3_expert_names},
      {"qwen3_moe", Family::Qwen3Moe, parse_qwen3_moe, bind_qwen3, qwen3_expert_names},
      {"qwen3", Family::Qwen3, parse_qwen3, bind_qwen3, qwen3_expert_names},
  };
  return table;
}

const FamilyEntry& family_of(const ModelConfig& cfg) {
  for (const FamilyEntry& f : model_families())
    if (f.family == cfg.family) return f;
  return model_families().front();  // unreachable: every Family has an entry
}

}  // namespace deltafin
