// Kimi K3 (model_type "kimi_k3", text_config "kimi_linear"): the family the
// engine was built for. Over the plain transformer it adds Block AttnRes
// residuals, KDA linear attention in three of four layers and gated NoPE MLA
// in the rest, a latent MoE (experts work in a narrower latent, with a norm
// and an up-projection after the routed sum) with sigmoid routing plus a
// correction bias and fused shared experts, SiTU activations, and MXFP4
// experts (compressed-tensors, group 32). Every other value is pinned.
#include <set>

#include <cstring>

#include "model/config_reader.h"
#include "model/weight_binder.h"
#include "model/families/families.h"

namespace deltafin {

Result<ModelConfig> parse_kimi_k3(const nlohmann::json& root) {
  ConfigReader r{root, "", {}};
  r.expect_string("model_type", "kimi_k3");
  r.expect_bool("tie_word_embeddings", false);
  auto* tc = r.field("text_config");
  DF_TRY(r.status);
  if (!tc->is_object()) return error("config.json: text_config must be an object");
  ConfigReader t{*tc, "text_config.", {}};
  ModelConfig c;
  c.family = Family::KimiK3;
  c.model_type = "kimi_k3";
  t.expect_string("model_type", "kimi_linear");
  t.expect_string("hidden_act", "situ");
  t.expect_string("moe_router_activation_func", "sigmoid");
  t.expect_string("topk_method", "noaux_tc");
  t.expect_bool("moe_renormalize", true);
  t.expect_bool("latent_moe_use_norm", true);
  t.expect_bool("mla_use_nope", true);
  t.expect_bool("mla_use_output_gate", true);
  t.expect_bool("tie_word_embeddings", false);
  t.expect_int("moe_layer_freq", 1);
  t.expect_int("num_nextn_predict_layers", 0);
  t.expect_int("num_expert_group", 1);
  t.expect_int("topk_group", 1);
  if (auto* v = t.field("routed_scaling_factor"); v && (!v->is_number() || v->get<double>() != 1.0))
    t.status = error("config.json: text_config.routed_scaling_factor must be 1.0");
  c.hidden = t.positive_int("hidden_size");
  c.num_layers = t.positive_int("num_hidden_layers");
  c.vocab = t.positive_int("vocab_size");
  c.dense_inter = t.positive_int("intermediate_size");
  c.rms_eps = t.number("rms_norm_eps");
  c.situ_beta = t.number("activation_situ_beta");
  c.situ_linear_beta = t.number("activation_situ_linear_beta");
  c.attn_res_block = t.positive_int("attn_res_block_size");
  int first_dense = t.nonneg_int("first_k_dense_replace");
  c.moe.num_experts = t.positive_int("num_experts");
  c.moe.top_k = t.positive_int("num_experts_per_token");
  c.moe.num_shared = t.positive_int("num_shared_experts");
  c.moe.expert_inter = t.positive_int("moe_intermediate_size");
  c.moe.latent = t.positive_int("routed_expert_hidden_size");
  c.mla.heads = t.positive_int("num_attention_heads");
  if (t.positive_int("num_key_value_heads") != c.mla.heads && t.status.ok())
    t.status = error("config.json: text_config.num_key_value_heads must equal num_attention_heads");
  c.mla.q_lora_rank = t.positive_int("q_lora_rank");
  c.mla.kv_lora_rank = t.positive_int("kv_lora_rank");
  c.mla.qk_nope_dim = t.positive_int("qk_nope_head_dim");
  c.mla.qk_rope_dim = t.positive_int("qk_rope_head_dim");
  c.mla.v_head_dim = t.positive_int("v_head_dim");
  c.bos_id = t.nonneg_int("bos_token_id");
  c.eos_id = t.nonneg_int("eos_token_id");
  c.pad_id = t.nonneg_int("pad_token_id");
  DF_TRY(t.status);

  auto* la = t.field("linear_attn_config");
  DF_TRY(t.status);
  if (!la->is_object()) return error("config.json: text_config.linear_attn_config must be an object");
  ConfigReader l{*la, "text_config.linear_attn_config.", {}};
  c.kda.heads = l.positive_int("num_heads");
  c.kda.head_dim = l.positive_int("head_dim");
  c.kda.conv_kernel = l.positive_int("short_conv_kernel_size");
  c.kda.gate_lower_bound = l.number("gate_lower_bound");
  l.expect_bool("use_full_rank_gate", true);
  auto kda_layers = l.int_list("kda_layers");
  auto mla_layers = l.int_list("full_attn_layers");
  DF_TRY(l.status);

  // Structural checks: the layer schedule covers every layer exactly once.
  c.attention.assign(c.num_layers, AttentionKind::KDA);
  std::set<int> seen;
  for (auto [list, kind] : {std::pair{&kda_layers, AttentionKind::KDA}, std::pair{&mla_layers, AttentionKind::MLA}}) {
    for (int one_based : *list) {
      if (one_based < 1 || one_based > c.num_layers)
        return error("config.json: layer {} in linear_attn_config is outside 1..{}", one_based, c.num_layers);
      if (!seen.insert(one_based).second)
        return error("config.json: layer {} is listed twice in kda_layers/full_attn_layers", one_based);
      c.attention[one_based - 1] = kind;
    }
  }
  if (int(seen.size()) != c.num_layers)
    return error("config.json: kda_layers and full_attn_layers must cover all {} layers", c.num_layers);
  if (first_dense > c.num_layers) return error("config.json: first_k_dense_replace exceeds num_hidden_layers");
  c.ffn.assign(c.num_layers, FfnKind::MoE);
  for (int i = 0; i < first_dense; ++i) c.ffn[i] = FfnKind::Dense;
  if (c.moe.top_k > c.moe.num_experts)
    return error("config.json: num_experts_per_token {} exceeds num_experts {}", c.moe.top_k, c.moe.num_experts);
  if (c.moe.latent % 32 || c.moe.expert_inter % 32)
    return error("config.json: routed_expert_hidden_size and moe_intermediate_size must be multiples of 32 (MXFP4 groups)");
  if (!(c.rms_eps > 0)) return error("config.json: text_config.rms_norm_eps must be positive");
  if (!(c.situ_beta > 0) || !(c.situ_linear_beta > 0)) return error("config.json: SiTU betas must be positive");
  if (!(c.kda.gate_lower_bound < 0)) return error("config.json: gate_lower_bound must be negative");
  if (c.eos_id >= c.vocab || c.bos_id >= c.vocab) return error("config.json: bos/eos ids must be below vocab_size");

  // Routed experts must be MXFP4 (compressed-tensors, group 32, uint8 scales).
  auto* q = t.field("quantization_config");
  DF_TRY(t.status);
  ConfigReader qr{*q, "text_config.quantization_config.", {}};
  qr.expect_string("quant_method", "compressed-tensors");
  qr.expect_string("format", "mxfp4-pack-quantized");
  auto* groups = qr.field("config_groups");
  DF_TRY(qr.status);
  if (!groups->is_object() || !groups->contains("group_0") || !(*groups)["group_0"].contains("weights"))
    return error("config.json: quantization_config.config_groups.group_0.weights is missing");
  ConfigReader w{(*groups)["group_0"]["weights"], "quantization_config.config_groups.group_0.weights.", {}};
  w.expect_int("num_bits", 4);
  w.expect_string("type", "float");
  w.expect_int("group_size", 32);
  DF_TRY(w.status);

  c.is_k3_full = c.hidden == 7168 && c.num_layers == 93 && c.vocab == 163840 && c.moe.num_experts == 896 &&
                 c.moe.top_k == 16 && c.moe.latent == 3584 && c.moe.expert_inter == 3072 && c.kda.heads == 96 &&
                 c.mla.heads == 96 && c.dense_inter == 33792;
  return c;
}

namespace {

Status bind_kda(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int H = c.hidden, C = c.kda.channels(), D = c.kda.head_dim, K = c.kda.conv_kernel;
  const std::string a = p + "self_attn.";
  DF_ASSIGN(L.q_proj, b.matrix(a + "q_proj.weight", C, H));
  DF_ASSIGN(L.k_proj, b.matrix(a + "k_proj.weight", C, H));
  DF_ASSIGN(L.v_proj, b.matrix(a + "v_proj.weight", C, H));
  DF_ASSIGN(L.g_proj, b.matrix(a + "g_proj.weight", C, H));
  DF_ASSIGN(L.f_a_proj, b.matrix(a + "f_a_proj.weight", D, H));
  DF_ASSIGN(L.f_b_proj, b.matrix(a + "f_b_proj.weight", C, D));
  DF_ASSIGN(L.b_proj, b.matrix(a + "b_proj.weight", c.kda.heads, H));
  DF_ASSIGN(L.o_proj, b.matrix(a + "o_proj.weight", H, C));
  DF_ASSIGN(L.q_conv, b.vec(a + "q_conv1d.weight", DType::F32, {C, 1, K}));
  DF_ASSIGN(L.k_conv, b.vec(a + "k_conv1d.weight", DType::F32, {C, 1, K}));
  DF_ASSIGN(L.v_conv, b.vec(a + "v_conv1d.weight", DType::F32, {C, 1, K}));
  DF_ASSIGN(L.dt_bias, b.vec(a + "dt_bias", DType::F32, {C}));
  DF_ASSIGN(L.o_norm, b.vec(a + "o_norm.weight", DType::F32, {D}));
  // A_log is one value per head, possibly zero-padded (K3 stores [128] for 96
  // heads; docs/design/checkpoint.md). Any non-zero padding is an error.
  const std::string an = a + "A_log";
  const TensorInfo* t = b.ck.find(an);
  if (!t) return error("{}: tensor '{}': missing", b.ck.dir(), an);
  if (t->dtype != DType::F32 || t->shape.size() != 1 || t->shape[0] < c.kda.heads)
    return error("{}: tensor '{}': F32 [>= {}] expected, got {} {}", *t->file, an, c.kda.heads,
                 dtype_name(t->dtype), t->shape_str());
  std::vector<float> all(t->numel());
  std::memcpy(all.data(), t->data, all.size() * 4);
  for (size_t i = c.kda.heads; i < all.size(); ++i)
    if (all[i] != 0.0f) return error("{}: tensor '{}': padding entry {} is {} (must be 0)", *t->file, an, i, all[i]);
  L.a_log.assign(all.begin(), all.begin() + c.kda.heads);
  return {};
}

Status bind_mla(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const auto& m = c.mla;
  const int H = c.hidden;
  const std::string a = p + "self_attn.";
  DF_ASSIGN(L.q_a_proj, b.matrix(a + "q_a_proj.weight", m.q_lora_rank, H));
  DF_ASSIGN(L.q_a_norm, b.vec(a + "q_a_layernorm.weight", DType::BF16, {m.q_lora_rank}));
  DF_ASSIGN(L.q_b_proj, b.matrix(a + "q_b_proj.weight", m.heads * m.qk_head_dim(), m.q_lora_rank));
  DF_ASSIGN(L.kv_a_proj, b.matrix(a + "kv_a_proj_with_mqa.weight", m.kv_lora_rank + m.qk_rope_dim, H));
  DF_ASSIGN(L.kv_a_norm, b.vec(a + "kv_a_layernorm.weight", DType::BF16, {m.kv_lora_rank}));
  DF_ASSIGN(L.kv_b_proj, b.matrix(a + "kv_b_proj.weight", m.heads * (m.qk_nope_dim + m.v_head_dim), m.kv_lora_rank));
  DF_ASSIGN(L.g_proj, b.matrix(a + "g_proj.weight", m.heads * m.v_head_dim, H));
  DF_ASSIGN(L.o_proj, b.matrix(a + "o_proj.weight", H, m.heads * m.v_head_dim));
  return {};
}

Status bind_ffn(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int H = c.hidden;
  if (L.ffn == FfnKind::Dense) {
    DF_ASSIGN(L.gate_proj, b.matrix(p + "mlp.gate_proj.weight", c.dense_inter, H));
    DF_ASSIGN(L.up_proj, b.matrix(p + "mlp.up_proj.weight", c.dense_inter, H));
    DF_ASSIGN(L.down_proj, b.matrix(p + "mlp.down_proj.weight", H, c.dense_inter));
    return {};
  }
  const auto& m = c.moe;
  const std::string s = p + "block_sparse_moe.";
  DF_ASSIGN(L.router, b.matrix(s + "gate.weight", m.num_experts, H));
  DF_ASSIGN(L.correction_bias, b.vec(s + "gate.e_score_correction_bias", DType::F32, {m.num_experts}));
  DF_ASSIGN(L.latent_down, b.matrix(s + "routed_expert_down_proj.weight", m.latent, H));
  DF_ASSIGN(L.latent_norm, b.vec(s + "routed_expert_norm.weight", DType::BF16, {m.latent}));
  DF_ASSIGN(L.latent_up, b.matrix(s + "routed_expert_up_proj.weight", H, m.latent));
  DF_ASSIGN(L.shared_gate, b.matrix(s + "shared_experts.gate_proj.weight", m.shared_inter(), H));
  DF_ASSIGN(L.shared_up, b.matrix(s + "shared_experts.up_proj.weight", m.shared_inter(), H));
  DF_ASSIGN(L.shared_down, b.matrix(s + "shared_experts.down_proj.weight", H, m.shared_inter()));
  return {};
}

}  // namespace

ExpertTensorNames kimi_k3_expert_names(const ModelConfig&, int layer, int expert) {
  ExpertTensorNames n;
  const char* parts[3] = {"w1", "w3", "w2"};  // gate, up, down
  for (int p = 0; p < 3; ++p) {
    n.weight[p] = expert_tensor_name(layer, expert, parts[p], "weight_packed");
    n.scale[p] = expert_tensor_name(layer, expert, parts[p], "weight_scale");
  }
  return n;
}

Result<ModelWeights> bind_kimi_k3(const Checkpoint& ck, const ModelConfig& c, bool check_values) {
  Binder b{ck, check_values};
  ModelWeights w;
  const int H = c.hidden;
  DF_ASSIGN(w.embed, b.matrix("language_model.model.embed_tokens.weight", c.vocab, H, /*int8_ok=*/false));
  DF_ASSIGN(w.lm_head, b.matrix("language_model.lm_head.weight", c.vocab, H));
  DF_ASSIGN(w.final_norm, b.vec("language_model.model.norm.weight", DType::BF16, {H}));
  DF_ASSIGN(w.out_res_norm, b.vec("language_model.model.output_attn_res_norm.weight", DType::BF16, {H}));
  DF_ASSIGN(w.out_res_proj, b.vec("language_model.model.output_attn_res_proj.weight", DType::BF16, {1, H}));
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights L;
    L.attention = c.attention[l];
    L.ffn = c.ffn[l];
    const std::string p = layer_prefix(l);
    DF_ASSIGN(L.input_norm, b.vec(p + "input_layernorm.weight", DType::BF16, {H}));
    DF_ASSIGN(L.post_attention_norm, b.vec(p + "post_attention_layernorm.weight", DType::BF16, {H}));
    DF_ASSIGN(L.attn_res_norm, b.vec(p + "self_attention_res_norm.weight", DType::BF16, {H}));
    DF_ASSIGN(L.attn_res_proj, b.vec(p + "self_attention_res_proj.weight", DType::BF16, {1, H}));
    DF_ASSIGN(L.mlp_res_norm, b.vec(p + "mlp_res_norm.weight", DType::BF16, {H}));
    DF_ASSIGN(L.mlp_res_proj, b.vec(p + "mlp_res_proj.weight", DType::BF16, {1, H}));
    DF_TRY(L.attention == AttentionKind::KDA ? bind_kda(b, c, p, L) : bind_mla(b, c, p, L));
    DF_TRY(bind_ffn(b, c, p, L));
    w.layers.push_back(std::move(L));
  }
  w.int8_matrices = b.int8_matrices;
  return w;
}

}  // namespace deltafin
