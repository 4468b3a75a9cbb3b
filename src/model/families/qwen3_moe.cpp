// Qwen3-MoE (model_type "qwen3_moe"): Qwen3 (qwen3.cpp) with routed experts
// in place of the dense MLP. It adds, per MoE layer: a router (mlp.gate) whose
// softmax over all experts picks the top num_experts_per_tok, weights
// renormalised over the chosen when norm_topk_prob; experts that are SiLU-
// gated MLPs of width moe_intermediate_size on the hidden state (no latent,
// no shared experts), in BF16 or FP8 blocks. Layers listed in mlp_only_layers,
// or off the decoder_sparse_step grid, keep the dense MLP.
#include <set>

#include "model/config_reader.h"
#include "model/families/families.h"

namespace deltafin {

Result<ModelConfig> parse_qwen3_moe(const nlohmann::json& root) {
  ModelConfig c;
  c.family = Family::Qwen3Moe;
  c.moe.format = ExpertFormat::Bf16;
  DF_TRY(parse_qwen3_common(root, c));
  ConfigReader r{root, "", {}};
  c.moe.num_experts = r.positive_int("num_experts");
  c.moe.top_k = r.positive_int("num_experts_per_tok");
  c.moe.expert_inter = r.positive_int("moe_intermediate_size");
  c.moe.router = {RouterKind::Softmax, r.opt_bool("norm_topk_prob", false)};
  const int step = r.has("decoder_sparse_step") ? r.positive_int("decoder_sparse_step") : 1;
  const std::vector<int> dense_only = r.opt_int_list("mlp_only_layers");
  DF_TRY(r.status);
  if (c.moe.top_k > c.moe.num_experts)
    return error("config.json: num_experts_per_tok {} exceeds num_experts {}", c.moe.top_k, c.moe.num_experts);
  std::set<int> listed;
  for (int l : dense_only) {
    if (l < 0 || l >= c.num_layers)
      return error("config.json: mlp_only_layers lists layer {}, outside 0..{}", l, c.num_layers - 1);
    listed.insert(l);
  }
  for (int l = 0; l < c.num_layers; ++l)
    c.ffn[size_t(l)] = listed.count(l) || (l + 1) % step != 0 ? FfnKind::Dense : FfnKind::MoE;
  return c;
}

}  // namespace deltafin
