// Qwen3 dense (model_type "qwen3"): the plain pre-norm transformer the other
// families are measured against. Residual: the running sum. Attention: GQA
// with RoPE (rotate-half pairs, rope_theta) and an RMS norm of each query and
// key head before the rotation. FFN: SiLU-gated MLP. Optionally tied
// embeddings (the LM head is the embedding matrix) and an FP8 spine (the
// Hub's -FP8 repositories: e4m3 weights with 128 x 128 block scales).
// Tensor names are the Hub's (model.layers.N.self_attn.q_proj.weight, ...).
#include <algorithm>
#include <cmath>

#include "model/config_reader.h"
#include "model/rope.h"
#include "model/families/families.h"
#include "model/weight_binder.h"

namespace deltafin {

namespace {

// quantization_config: absent (BF16) or the Hub's FP8 block format.
Status parse_quantization(ConfigReader& r, ModelConfig& c) {
  if (!r.has("quantization_config")) return {};
  const nlohmann::json* q = r.field("quantization_config");
  if (!q->is_object()) return error("config.json: quantization_config must be an object");
  ConfigReader qr{*q, "quantization_config.", {}};
  auto* method = qr.field("quant_method");
  DF_TRY(qr.status);
  if (!method->is_string() || method->get<std::string>() != "fp8")
    return error("config.json: quantization_config.quant_method {} is not supported (supported: \"fp8\" with "
                 "weight_block_size [128, 128])",
                 method->dump());
  if (qr.has("fmt")) qr.expect_string("fmt", "e4m3");
  auto block = qr.int_list("weight_block_size");
  DF_TRY(qr.status);
  if (block != std::vector<int>{kFp8Block, kFp8Block})
    return error("config.json: quantization_config.weight_block_size must be [128, 128]");
  c.fp8_spine = true;
  c.moe.format = ExpertFormat::Fp8Block;
  return {};
}

// RoPE frequencies, with YaRN when rope_scaling asks for it (model/rope.h;
// the attention factor as transformers' _compute_yarn_parameters sets it).
Status parse_rope(ConfigReader& r, int max_positions, GqaConfig& g) {
  g.inv_freq = rope_inv_freq(g.rope_theta, g.head_dim, nullptr);
  g.attention_factor = 1.0;
  if (!r.has("rope_scaling")) return {};
  const nlohmann::json* rs = r.field("rope_scaling");
  if (!rs->is_object()) return error("config.json: rope_scaling must be an object or null");
  ConfigReader y{*rs, "rope_scaling.", {}};
  const std::string type = rs->value("rope_type", rs->value("type", std::string("default")));
  if (type == "default") return {};
  if (type != "yarn")
    return error("config.json: rope_scaling type \"{}\" is not supported (supported: \"yarn\")", type);
  YarnParams yarn;
  yarn.factor = y.number("factor");
  yarn.original_max_positions = y.opt_number("original_max_position_embeddings", double(max_positions));
  yarn.beta_fast = y.opt_number("beta_fast", 32);
  yarn.beta_slow = y.opt_number("beta_slow", 1);
  yarn.truncate = y.opt_bool("truncate", true);
  DF_TRY(y.status);
  if (!(yarn.factor >= 1)) return error("config.json: rope_scaling.factor must be at least 1");
  if (!(yarn.original_max_positions > 0))
    return error("config.json: rope_scaling.original_max_position_embeddings must be positive");
  if (y.has("attention_factor"))
    g.attention_factor = y.opt_number("attention_factor", 1.0);
  else if (y.has("mscale") && y.has("mscale_all_dim"))
    g.attention_factor = yarn_mscale(yarn.factor, y.opt_number("mscale", 1)) /
                         yarn_mscale(yarn.factor, y.opt_number("mscale_all_dim", 1));
  else
    g.attention_factor = yarn_mscale(yarn.factor, 1.0);
  DF_TRY(y.status);
  g.inv_freq = rope_inv_freq(g.rope_theta, g.head_dim, &yarn);
  return {};
}

}  // namespace

Status parse_qwen3_common(const nlohmann::json& root, ModelConfig& c) {
  ConfigReader r{root, "", {}};
  c.model_type = root.value("model_type", "");
  c.residual = ResidualKind::Plain;
  c.activation = Activation::SiluGlu;
  r.expect_string("hidden_act", "silu");
  c.hidden = r.positive_int("hidden_size");
  c.num_layers = r.positive_int("num_hidden_layers");
  c.vocab = r.positive_int("vocab_size");
  c.dense_inter = r.positive_int("intermediate_size");
  c.rms_eps = float(r.number("rms_norm_eps"));
  c.gqa.heads = r.positive_int("num_attention_heads");
  c.gqa.kv_heads = r.positive_int("num_key_value_heads");
  DF_TRY(r.status);
  c.gqa.head_dim = r.has("head_dim") ? r.positive_int("head_dim") : c.hidden / c.gqa.heads;
  c.gqa.rope_theta = r.opt_number("rope_theta", 10000.0);
  c.gqa.qk_norm = true;
  c.tied_embeddings = r.opt_bool("tie_word_embeddings", false);
  if (r.opt_bool("attention_bias", false))
    r.status = error("config.json: attention_bias true is not supported (Qwen3 publishes false)");
  if (r.opt_bool("use_sliding_window", false))
    r.status = error("config.json: use_sliding_window true is not supported (Qwen3 publishes false)");
  c.bos_id = r.opt_int("bos_token_id", -1);
  c.eos_id = r.opt_int("eos_token_id", -1);
  DF_TRY(r.status);
  DF_TRY(parse_quantization(r, c));
  DF_TRY(parse_rope(r, r.opt_int("max_position_embeddings", 32768), c.gqa));
  if (c.gqa.heads % c.gqa.kv_heads)
    return error("config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}", c.gqa.heads,
                 c.gqa.kv_heads);
  if (c.gqa.head_dim % 2) return error("config.json: head_dim {} must be even (RoPE pairs)", c.gqa.head_dim);
  if (!(c.gqa.rope_theta > 1)) return error("config.json: rope_theta must be greater than 1");
  if (!(c.rms_eps > 0)) return error("config.json: rms_norm_eps must be positive");
  if (c.eos_id >= c.vocab || c.bos_id >= c.vocab) return error("config.json: bos/eos ids must be below vocab_size");
  c.attention.assign(size_t(c.num_layers), AttentionKind::GQA);
  c.ffn.assign(size_t(c.num_layers), FfnKind::Dense);
  return {};
}

Result<ModelConfig> parse_qwen3(const nlohmann::json& root) {
  ModelConfig c;
  c.family = Family::Qwen3;
  DF_TRY(parse_qwen3_common(root, c));
  return c;
}

Result<ModelWeights> bind_qwen3(const Checkpoint& ck, const ModelConfig& c, bool check_values) {
  Binder b{ck, check_values};
  ModelWeights w;
  const int H = c.hidden, D = c.gqa.head_dim;
  DF_ASSIGN(w.embed, b.matrix("model.embed_tokens.weight", c.vocab, H, /*int8_ok=*/false));
  if (w.embed.dtype != DType::BF16) return error("{}: model.embed_tokens.weight must be BF16", ck.dir());
  if (c.tied_embeddings) {
    if (ck.find("lm_head.weight"))
      return error("{}: tie_word_embeddings is true but the checkpoint has lm_head.weight", ck.dir());
    w.lm_head = w.embed;
  } else {
    DF_ASSIGN(w.lm_head, b.matrix("lm_head.weight", c.vocab, H));
  }
  DF_ASSIGN(w.final_norm, b.vec("model.norm.weight", DType::BF16, {H}));
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights L;
    L.attention = c.attention[size_t(l)];
    L.ffn = c.ffn[size_t(l)];
    const std::string p = fmt::format("model.layers.{}.", l), a = p + "self_attn.";
    DF_ASSIGN(L.input_norm, b.vec(p + "input_layernorm.weight", DType::BF16, {H}));
    DF_ASSIGN(L.post_attention_norm, b.vec(p + "post_attention_layernorm.weight", DType::BF16, {H}));
    DF_ASSIGN(L.q_proj, b.matrix(a + "q_proj.weight", c.gqa.q_dim(), H));
    DF_ASSIGN(L.k_proj, b.matrix(a + "k_proj.weight", c.gqa.kv_dim(), H));
    DF_ASSIGN(L.v_proj, b.matrix(a + "v_proj.weight", c.gqa.kv_dim(), H));
    DF_ASSIGN(L.o_proj, b.matrix(a + "o_proj.weight", H, c.gqa.q_dim()));
    DF_ASSIGN(L.q_norm, b.vec(a + "q_norm.weight", DType::BF16, {D}));
    DF_ASSIGN(L.k_norm, b.vec(a + "k_norm.weight", DType::BF16, {D}));
    if (L.ffn == FfnKind::Dense) {
      DF_ASSIGN(L.gate_proj, b.matrix(p + "mlp.gate_proj.weight", c.dense_inter, H));
      DF_ASSIGN(L.up_proj, b.matrix(p + "mlp.up_proj.weight", c.dense_inter, H));
      DF_ASSIGN(L.down_proj, b.matrix(p + "mlp.down_proj.weight", H, c.dense_inter));
    } else {
      DF_ASSIGN(L.router, b.matrix(p + "mlp.gate.weight", c.moe.num_experts, H));
    }
    w.layers.push_back(std::move(L));
  }
  w.int8_matrices = b.int8_matrices;
  return w;
}

ExpertTensorNames qwen3_expert_names(const ModelConfig& c, int layer, int expert) {
  ExpertTensorNames n;
  const char* parts[3] = {"gate_proj", "up_proj", "down_proj"};
  for (int p = 0; p < 3; ++p) {
    n.weight[p] = fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", layer, expert, parts[p]);
    if (c.moe.format == ExpertFormat::Fp8Block) n.scale[p] = n.weight[p] + "_scale_inv";
  }
  return n;
}

}  // namespace deltafin
