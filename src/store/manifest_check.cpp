#include "store/manifest_check.h"

#include "model/expert_layout.h"

namespace deltafin {

Status check_manifest_model(const Manifest& m, const ModelConfig& cfg, const std::string& config_path) {
  std::vector<int> moe;
  for (int l = 0; l < cfg.num_layers; ++l)
    if (cfg.ffn[l] == FfnKind::MoE) moe.push_back(l);
  auto list = [](const std::vector<int>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", v[i]);
    return s + "]";
  };
  if (m.model_type != cfg.model_type)
    return error("manifest model.model_type '{}' != '{}' in {}", m.model_type, cfg.model_type, config_path);
  if (m.expert_format != expert_format_name(cfg.moe.format))
    return error("manifest model.expert_format '{}' != '{}' from {}", m.expert_format,
                 expert_format_name(cfg.moe.format), config_path);
  if (m.num_layers != cfg.num_layers)
    return error("manifest model.num_layers {} != {} layers in {}", m.num_layers, cfg.num_layers, config_path);
  if (m.moe_layers != moe)
    return error("manifest model.moe_layers {} != MoE layers {} in {}", list(m.moe_layers), list(moe), config_path);
  if (m.num_experts != cfg.moe.num_experts)
    return error("manifest model.num_experts {} != {} experts per layer in {}", m.num_experts, cfg.moe.num_experts,
                 config_path);
  if (m.expert_bytes != cfg.expert_bytes())
    return error("manifest model.expert_bytes {} != {} bytes per expert from {} (3 x {} {} x {} with scales)",
                 m.expert_bytes, cfg.expert_bytes(), config_path, expert_format_name(cfg.moe.format),
                 cfg.moe.expert_inter, cfg.expert_in());
  return {};
}

}  // namespace deltafin
