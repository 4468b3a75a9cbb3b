#include "model/config.h"

#include "core/dtype.h"

#include "model/families/families.h"

namespace deltafin {

Result<ModelConfig> ModelConfig::from_json(const nlohmann::json& root) {
  if (!root.is_object()) return error("config.json: not a JSON object");
  auto it = root.find("model_type");
  if (it == root.end() || !it->is_string()) return error("config.json: model_type is missing");
  const std::string type = it->get<std::string>();
  std::string known;
  for (const FamilyEntry& f : model_families()) {
    if (type == f.model_type) return f.parse(root);
    known += known.empty() ? "" : ", ";
    known += f.model_type;
  }
  return error("config.json: model_type \"{}\" is not supported (supported: {})", type, known);
}

int ModelConfig::num_kda_layers() const {
  int n = 0;
  for (auto a : attention) n += a == AttentionKind::KDA;
  return n;
}
int ModelConfig::num_mla_layers() const {
  int n = 0;
  for (auto a : attention) n += a == AttentionKind::MLA;
  return n;
}
int ModelConfig::num_moe_layers() const {
  int n = 0;
  for (auto f : ffn) n += f == FfnKind::MoE;
  return n;
}
int ModelConfig::num_gqa_layers() const {
  int n = 0;
  for (auto a : attention) n += a == AttentionKind::GQA;
  return n;
}
uint64_t ModelConfig::expert_bytes() const {
  const uint64_t in = uint64_t(expert_in()), inter = uint64_t(moe.expert_inter), w = inter * in;
  switch (moe.format) {
    case ExpertFormat::Mxfp4: return 3 * (w / 2 + w / 32);
    case ExpertFormat::Bf16: return 3 * w * 2;
    case ExpertFormat::Fp8Block: {
      const uint64_t b = kFp8Block, blocks = (inter + b - 1) / b * ((in + b - 1) / b);
      return 3 * w + 3 * blocks * 4;
    }
  }
  return 0;
}

}  // namespace deltafin
