#include "model/config.h"

#include <set>

namespace deltafin {

namespace {

struct Reader {
  const nlohmann::json& obj;
  std::string where;
  Status status;

  const nlohmann::json* field(const char* key) {
    if (!status.ok()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end()) {
      status = error("config.json: {}{} is missing", where, key);
      return nullptr;
    }
    return &*it;
  }
  int positive_int(const char* key) {
    auto* v = field(key);
    if (!v) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (1 << 30)) {
      status = error("config.json: {}{} must be a positive integer", where, key);
      return 0;
    }
    return int(v->get<int64_t>());
  }
  int nonneg_int(const char* key) {
    auto* v = field(key);
    if (!v) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > (1 << 30)) {
      status = error("config.json: {}{} must be a non-negative integer", where, key);
      return 0;
    }
    return int(v->get<int64_t>());
  }
  float number(const char* key) {
    auto* v = field(key);
    if (!v) return 0;
    if (!v->is_number()) {
      status = error("config.json: {}{} must be a number", where, key);
      return 0;
    }
    return v->get<float>();
  }
  void expect_string(const char* key, const char* value) {
    auto* v = field(key);
    if (v && (!v->is_string() || v->get<std::string>() != value))
      status = error("config.json: {}{} must be \"{}\"", where, key, value);
  }
  void expect_bool(const char* key, bool value) {
    auto* v = field(key);
    if (v && (!v->is_boolean() || v->get<bool>() != value))
      status = error("config.json: {}{} must be {}", where, key, value);
  }
  void expect_int(const char* key, int value) {
    auto* v = field(key);
    if (v && (!v->is_number_integer() || v->get<int64_t>() != value))
      status = error("config.json: {}{} must be {}", where, key, value);
  }
  std::vector<int> int_list(const char* key) {
    std::vector<int> out;
    auto* v = field(key);
    if (!v) return out;
    if (!v->is_array()) {
      status = error("config.json: {}{} must be a list of integers", where, key);
      return out;
    }
    for (auto& x : *v) {
      if (!x.is_number_integer()) {
        status = error("config.json: {}{} must be a list of integers", where, key);
        return {};
      }
      out.push_back(x.get<int>());
    }
    return out;
  }
};

}  // namespace

Result<ModelConfig> ModelConfig::from_json(const nlohmann::json& root) {
  if (!root.is_object()) return error("config.json: not a JSON object");
  Reader r{root, "", {}};
  r.expect_string("model_type", "kimi_k3");
  r.expect_bool("tie_word_embeddings", false);
  auto* tc = r.field("text_config");
  DF_TRY(r.status);
  if (!tc->is_object()) return error("config.json: text_config must be an object");
  Reader t{*tc, "text_config.", {}};
  ModelConfig c;
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
  Reader l{*la, "text_config.linear_attn_config.", {}};
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
  Reader qr{*q, "text_config.quantization_config.", {}};
  qr.expect_string("quant_method", "compressed-tensors");
  qr.expect_string("format", "mxfp4-pack-quantized");
  auto* groups = qr.field("config_groups");
  DF_TRY(qr.status);
  if (!groups->is_object() || !groups->contains("group_0") || !(*groups)["group_0"].contains("weights"))
    return error("config.json: quantization_config.config_groups.group_0.weights is missing");
  Reader w{(*groups)["group_0"]["weights"], "quantization_config.config_groups.group_0.weights.", {}};
  w.expect_int("num_bits", 4);
  w.expect_string("type", "float");
  w.expect_int("group_size", 32);
  DF_TRY(w.status);

  c.is_k3_full = c.hidden == 7168 && c.num_layers == 93 && c.vocab == 163840 && c.moe.num_experts == 896 &&
                 c.moe.top_k == 16 && c.moe.latent == 3584 && c.moe.expert_inter == 3072 && c.kda.heads == 96 &&
                 c.mla.heads == 96 && c.dense_inter == 33792;
  return c;
}

int ModelConfig::num_kda_layers() const {
  int n = 0;
  for (auto a : attention) n += a == AttentionKind::KDA;
  return n;
}
int ModelConfig::num_mla_layers() const { return num_layers - num_kda_layers(); }
int ModelConfig::num_moe_layers() const {
  int n = 0;
  for (auto f : ffn) n += f == FfnKind::MoE;
  return n;
}
uint64_t ModelConfig::expert_bytes() const {
  const uint64_t w = uint64_t(moe.expert_inter) * uint64_t(moe.latent);
  return 3 * (w / 2 + w / 32);
}

}  // namespace deltafin
