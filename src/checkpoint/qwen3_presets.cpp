#include "checkpoint/qwen3_presets.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"

namespace deltafin {

namespace {

constexpr int kQwenVocab = 151936, kQwenBos = 151643, kQwenEos = 151645;

Qwen3Preset moe_tiny() {
  Qwen3Preset p;
  p.name = "qwen3-moe-tiny", p.model_type = "qwen3_moe";
  p.hidden = 256, p.num_layers = 4, p.heads = 4, p.kv_heads = 2, p.head_dim = 64, p.vocab = 512;
  p.inter = 512, p.moe_inter = 192, p.experts = 16, p.top_k = 4;
  p.mlp_only_layers = {1};
  p.max_window_layers = p.num_layers;
  p.shards = 2;
  return p;
}

Qwen3Preset dense_tiny() {
  Qwen3Preset p;
  p.name = "qwen3-tiny", p.model_type = "qwen3";
  p.hidden = 256, p.num_layers = 4, p.heads = 4, p.kv_heads = 2, p.head_dim = 64, p.vocab = 512;
  p.inter = 512;
  p.tie_embeddings = true;
  p.max_window_layers = p.num_layers;
  p.shards = 2;
  return p;
}

// A released Qwen3-MoE configuration (its config.json on the Hub), no data.
Qwen3Preset released(std::string name, int hidden, int layers, int heads, int kv, int inter, int moe_inter, int experts,
                     int64_t max_pos, double theta, int shards) {
  Qwen3Preset p;
  p.name = std::move(name), p.model_type = "qwen3_moe";
  p.hidden = hidden, p.num_layers = layers, p.heads = heads, p.kv_heads = kv, p.head_dim = 128, p.vocab = kQwenVocab;
  p.inter = inter, p.moe_inter = moe_inter, p.experts = experts, p.top_k = 8;
  p.max_positions = max_pos, p.rope_theta = theta, p.max_window_layers = layers;
  p.bos_id = kQwenBos, p.eos_id = kQwenEos;
  p.shards = shards;
  p.sparse = true;
  return p;
}

// Qwen3-235B-A22B's routing shape (94 layers, 128 experts, top-8, its
// attention and vocabulary) with the expert width scaled down to a budget.
Qwen3Preset shaped_235b(double experts_gb, bool fp8) {
  Qwen3Preset p = released("qwen3-235b-shaped", 4096, 94, 64, 4, 12288, 1536, 128, 40960, 1000000.0, 1);
  p.sparse = false;
  p.fp8 = fp8;
  p.experts_gb = experts_gb;
  // One expert: three [I, H] matrices; BF16 2 bytes a weight, FP8 1 (+ scales).
  const double per_weight = fp8 ? 1.0 + 4.0 / (kFp8Block * kFp8Block) : 2.0;
  const double per_expert_inter = 3.0 * p.hidden * per_weight;  // bytes per unit of I
  const double inter = experts_gb * 1e9 / (double(p.num_layers) * p.experts * per_expert_inter);
  p.moe_inter = std::max(128, int(std::lround(inter / 128)) * 128);
  p.inter = p.moe_inter;  // no mlp-only layers; kept small for consistency
  p.shards = std::max(2, int(std::ceil(double(qwen3_expert_bytes_total(p)) / 2e9)));
  return p;
}

}  // namespace

bool Qwen3Preset::is_moe_layer(int layer) const {
  if (!is_moe() || experts == 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

std::vector<std::string> qwen3_preset_names() {
  return {"qwen3-moe-tiny", "qwen3-tiny", "qwen3-235b-shaped", "qwen3-30b-a3b-sparse", "qwen3-235b-a22b-sparse",
          "qwen3-coder-480b-a35b-sparse"};
}

bool is_qwen3_preset(std::string_view name) {
  for (const auto& n : qwen3_preset_names())
    if (n == name) return true;
  return false;
}

Result<Qwen3Preset> find_qwen3_preset(std::string_view name, const Qwen3PresetOptions& o) {
  if (o.expert_format != "bf16" && o.expert_format != "fp8")
    return error("--expert-format '{}': expected bf16 or fp8", o.expert_format);
  const bool fp8 = o.expert_format == "fp8";
  if (o.vocab < 0 || o.vocab > 4'000'000) return error("--vocab {}: out of range (1 .. 4000000)", o.vocab);
  if (name == "qwen3-235b-shaped") {
    if (!(o.experts_gb > 0) || !std::isfinite(o.experts_gb) || o.experts_gb > 100000)
      return error("preset qwen3-235b-shaped needs --experts-gb N (total routed-expert size in GB, 0 < N <= 100000)");
  } else if (o.experts_gb != 0) {
    return error("--experts-gb applies to presets k3-shaped and qwen3-235b-shaped only, not '{}'", name);
  }
  Qwen3Preset p;
  if (name == "qwen3-moe-tiny") p = moe_tiny();
  else if (name == "qwen3-tiny") p = dense_tiny();
  else if (name == "qwen3-235b-shaped") p = shaped_235b(o.experts_gb, fp8);
  else if (name == "qwen3-30b-a3b-sparse")
    p = released("qwen3-30b-a3b-sparse", 2048, 48, 32, 4, 6144, 768, 128, 40960, 1000000.0, 16);
  else if (name == "qwen3-235b-a22b-sparse")
    p = released("qwen3-235b-a22b-sparse", 4096, 94, 64, 4, 12288, 1536, 128, 40960, 1000000.0, 118);
  else if (name == "qwen3-coder-480b-a35b-sparse")
    p = released("qwen3-coder-480b-a35b-sparse", 6144, 62, 96, 8, 8192, 2560, 160, 262144, 10000000.0, 241);
  else
    return error("unknown qwen3 preset '{}'", name);
  p.fp8 = fp8;
  if (o.vocab > 0) {
    // A vocabulary as large as Qwen3's is for its real tokenizer files
    // (copied in by the test that asks for it): the special ids become that
    // tokenizer's <|endoftext|> and <|im_end|>.
    if (o.vocab > kQwenEos) p.bos_id = kQwenBos, p.eos_id = kQwenEos;
    if (o.vocab <= p.eos_id) return error("--vocab {}: must exceed the preset's eos id {}", o.vocab, p.eos_id);
    p.vocab = o.vocab;
  }
  return p;
}

uint64_t qwen3_expert_bytes_total(const Qwen3Preset& p) {
  if (!p.is_moe()) return 0;
  const uint64_t H = uint64_t(p.hidden), I = uint64_t(p.moe_inter), B = kFp8Block;
  uint64_t per_expert = 3 * I * H * 2;
  if (p.fp8) per_expert = 3 * I * H + 4 * 3 * ((I + B - 1) / B) * ((H + B - 1) / B);
  uint64_t layers = 0;
  for (int l = 0; l < p.num_layers; ++l) layers += p.is_moe_layer(l);
  return per_expert * uint64_t(p.experts) * layers;
}

nlohmann::ordered_json qwen3_config_json(const Qwen3Preset& p) {
  using J = nlohmann::ordered_json;
  J j;
  j["architectures"] = {p.is_moe() ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"};
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = p.bos_id;
  if (p.is_moe()) j["decoder_sparse_step"] = p.decoder_sparse_step;
  j["eos_token_id"] = p.eos_id;
  j["head_dim"] = p.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = p.hidden;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = p.inter;
  j["max_position_embeddings"] = p.max_positions;
  j["max_window_layers"] = p.max_window_layers;
  if (p.is_moe()) j["mlp_only_layers"] = p.mlp_only_layers;
  j["model_type"] = p.model_type;
  if (p.is_moe()) {
    j["moe_intermediate_size"] = p.moe_inter;
    j["norm_topk_prob"] = p.norm_topk_prob;
  }
  j["num_attention_heads"] = p.heads;
  if (p.is_moe()) {
    j["num_experts"] = p.experts;
    j["num_experts_per_tok"] = p.top_k;
  }
  j["num_hidden_layers"] = p.num_layers;
  j["num_key_value_heads"] = p.kv_heads;
  if (p.is_moe()) j["output_router_logits"] = false;
  if (p.fp8)
    j["quantization_config"] = {{"activation_scheme", "dynamic"},
                                {"fmt", "e4m3"},
                                {"quant_method", "fp8"},
                                {"weight_block_size", {kFp8Block, kFp8Block}}};
  j["rms_norm_eps"] = p.rms_norm_eps;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = p.rope_theta;
  if (p.is_moe()) j["router_aux_loss_coef"] = 0.001;
  j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = p.tie_embeddings;
  j["torch_dtype"] = "bfloat16";
  j["transformers_version"] = "4.51.0";
  j["use_cache"] = true;
  j["use_sliding_window"] = false;
  j["vocab_size"] = p.vocab;
  j["deltafin_preset"] = p.name;
  return j;
}

nlohmann::ordered_json qwen3_generation_config_json(const Qwen3Preset& p) {
  return {{"bos_token_id", p.bos_id},
          {"do_sample", true},
          {"eos_token_id", {p.eos_id}},
          {"pad_token_id", p.bos_id},
          {"temperature", 0.6},
          {"top_k", 20},
          {"top_p", 0.95},
          {"transformers_version", "4.51.0"}};
}

}  // namespace deltafin
