// The supported model families: per model_type, how its config.json maps
// onto the engine's block choices (ModelConfig), how its spine tensors are
// named (ModelWeights::bind) and how its routed experts are stored. One file
// per family in this folder; the table in families.cpp lists them.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "core/result.h"
#include "model/config.h"
#include "model/weights.h"

namespace deltafin {

// One routed expert's tensors, per part in the order gate, up, down: the
// weight and (MXFP4 and FP8) its scale tensor.
struct ExpertTensorNames {
  std::string weight[3], scale[3];
};

struct FamilyEntry {
  const char* model_type;
  Family family;
  Result<ModelConfig> (*parse)(const nlohmann::json& root);
  Result<ModelWeights> (*bind)(const Checkpoint& ck, const ModelConfig& cfg, bool check_values);
  ExpertTensorNames (*expert_names)(const ModelConfig& cfg, int layer, int expert);
};

const std::vector<FamilyEntry>& model_families();
const FamilyEntry& family_of(const ModelConfig& cfg);

// The family files' entry points.
Result<ModelConfig> parse_kimi_k3(const nlohmann::json& root);
Result<ModelWeights> bind_kimi_k3(const Checkpoint& ck, const ModelConfig& cfg, bool check_values);
ExpertTensorNames kimi_k3_expert_names(const ModelConfig& cfg, int layer, int expert);
Result<ModelConfig> parse_qwen3(const nlohmann::json& root);
Result<ModelConfig> parse_qwen3_moe(const nlohmann::json& root);
Result<ModelWeights> bind_qwen3(const Checkpoint& ck, const ModelConfig& cfg, bool check_values);
ExpertTensorNames qwen3_expert_names(const ModelConfig& cfg, int layer, int expert);

// Shared by qwen3.cpp and qwen3_moe.cpp: the dense Qwen3 fields of `root`
// into `c` (attention, norms, rope, dense MLP, tokens, FP8 spine).
Status parse_qwen3_common(const nlohmann::json& root, ModelConfig& c);

}  // namespace deltafin
