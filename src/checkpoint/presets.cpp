#include "checkpoint/presets.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace deltafin {

namespace {

ModelPreset tiny() {
  ModelPreset p;
  p.name = "tiny";
  p.hidden = 256, p.num_layers = 6, p.text_ranks = 256, p.vocab = 512, p.dense_inter = 512;
  p.attn_res_block = 2;  // blocks start at layers 0, 2, 4
  p.kda_heads = 4, p.kda_head_dim = 32, p.a_log_len = 8;
  p.mla_heads = 4, p.q_lora = 64, p.kv_lora = 64, p.qk_nope = 32, p.qk_rope = 32, p.v_head = 32;
  p.experts = 32, p.top_k = 4, p.expert_inter = 128, p.latent = 128;
  p.max_positions = 4096;
  p.shards = 3;
  return p;
}

ModelPreset small() {
  ModelPreset p;
  p.name = "small";
  p.hidden = 1024, p.num_layers = 12, p.text_ranks = 256, p.vocab = 512, p.dense_inter = 2048;
  p.attn_res_block = 4;
  p.kda_heads = 8, p.kda_head_dim = 64, p.a_log_len = 16;
  p.mla_heads = 8, p.q_lora = 256, p.kv_lora = 128, p.qk_nope = 64, p.qk_rope = 32, p.v_head = 64;
  p.experts = 384, p.top_k = 16, p.expert_inter = 384, p.latent = 512;
  p.max_positions = 65536;
  p.shards = 8;
  return p;
}

// K3's routing shape — 896 experts, top-16, 2 shared, the KDA/MLA schedule,
// dense layer 0, AttnRes blocks — on a small spine, so decode is bound by
// expert reads. Expert widths are sized so all routed experts total about
// experts_gb * 1e9 bytes.
ModelPreset k3_shaped(double experts_gb) {
  ModelPreset p;
  p.name = "k3-shaped";
  p.hidden = 512, p.num_layers = 16, p.text_ranks = 256, p.vocab = 512, p.dense_inter = 1024;
  p.attn_res_block = 4;
  p.kda_heads = 4, p.kda_head_dim = 64, p.a_log_len = 8;
  p.mla_heads = 4, p.q_lora = 128, p.kv_lora = 128, p.qk_nope = 64, p.qk_rope = 32, p.v_head = 64;
  p.experts = 896, p.top_k = 16, p.shared = 2;
  p.max_positions = 65536;
  p.experts_gb = experts_gb;
  // One expert is 3 * inter * latent * 17/32 bytes (4-bit nibbles + one scale
  // per 32). The widest latent (<= 512) whose inter (a multiple of 32) lands
  // within 5% of the budget; if none does, the closest pair.
  const double per_expert = experts_gb * 1e9 / (double(preset_moe_layers(p)) * p.experts);
  const double product = per_expert / (3.0 * 17 / 32);
  double best_err = 1e300;
  for (int lt = 512; lt >= 32; lt -= 32) {
    const int inter = std::max(32, int(std::lround(product / lt / 32)) * 32);
    const double err = std::abs(double(inter) * lt / product - 1);
    if (err < best_err - 1e-12) best_err = err, p.latent = lt, p.expert_inter = inter;
    if (err <= 0.05) break;
  }
  // Shards of about 512 MB, so no file of the full checkpoint is large.
  const double expert_total = double(preset_expert_bytes(p)) * preset_moe_layers(p) * p.experts;
  p.shards = std::max(2, int(std::ceil(expert_total / 512e6)));
  return p;
}

// K3's released text configuration (docs/design/checkpoint.md), 96 shards.
ModelPreset k3_full_sparse() {
  ModelPreset p;
  p.name = "k3-full-sparse";
  p.hidden = 7168, p.num_layers = 93, p.text_ranks = 163584, p.vocab = 163840, p.dense_inter = 33792;
  p.attn_res_block = 12;
  p.kda_heads = 96, p.kda_head_dim = 128, p.a_log_len = 128;
  p.mla_heads = 96, p.q_lora = 1536, p.kv_lora = 512, p.qk_nope = 128, p.qk_rope = 64, p.v_head = 128;
  p.experts = 896, p.top_k = 16, p.expert_inter = 3072, p.latent = 3584;
  p.max_positions = 1048576;
  p.shards = 96, p.shard_digits = 6;
  p.sparse = true;
  p.write_rank_file = false;  // the real 163,584-rank BPE file cannot be synthesised
  return p;
}

// K3's spellings for the special ids, by offset from the first special id
// (docs/design/tokenizer.md); every other slot is <|reserved_token_{id}|>.
const std::map<int, const char*>& special_spellings() {
  static const std::map<int, const char*> m = {
      {0, "[BOS]"},           {1, "[EOS]"},           {2, "<|end_of_msg|>"},     {3, "<|open|>"},
      {4, "<|close|>"},       {5, "<|sep|>"},         {6, "[start_header_id]"},  {7, "[end_header_id]"},
      {9, "[EOT]"},           {18, "<|media_begin|>"}, {19, "<|media_content|>"}, {20, "<|media_end|>"},
      {21, "<|media_pad|>"},  {65, "<osagent_mode>"}, {254, "[UNK]"},            {255, "[PAD]"}};
  return m;
}

std::string special_spelling(int ranks, int offset) {
  auto it = special_spellings().find(offset);
  return it != special_spellings().end() ? it->second : fmt::format("<|reserved_token_{}|>", ranks + offset);
}

}  // namespace

std::vector<std::string> preset_names() { return {"tiny", "small", "k3-shaped", "k3-full-sparse"}; }

Result<ModelPreset> find_preset(std::string_view name, double experts_gb) {
  if (name == "k3-shaped") {
    if (!(experts_gb > 0) || !std::isfinite(experts_gb))
      return error("preset k3-shaped needs --experts-gb N (total routed-expert size in GB, > 0; fractions allowed)");
    if (experts_gb > 100000) return error("--experts-gb {}: too large", experts_gb);
    return k3_shaped(experts_gb);
  }
  if (name != "tiny" && name != "small" && name != "k3-full-sparse")
    return error("unknown preset '{}' (known: tiny, small, k3-shaped, k3-full-sparse)", name);
  if (experts_gb != 0) return error("--experts-gb applies to preset k3-shaped only, not '{}'", name);
  if (name == "tiny") return tiny();
  if (name == "small") return small();
  return k3_full_sparse();
}

uint64_t preset_expert_bytes(const ModelPreset& p) {
  return 3 * (uint64_t(p.expert_inter) * p.latent / 2 + uint64_t(p.expert_inter) * p.latent / 32);
}

int preset_moe_layers(const ModelPreset& p) {
  int n = 0;
  for (int l = 0; l < p.num_layers; ++l) n += p.is_moe(l);
  return n;
}

nlohmann::ordered_json preset_config_json(const ModelPreset& p) {
  using J = nlohmann::ordered_json;
  std::vector<int> kda, mla;  // 1-based, as published
  for (int l = 0; l < p.num_layers; ++l) (p.is_mla(l) ? mla : kda).push_back(l + 1);
  J la = {{"num_heads", p.kda_heads},
          {"head_dim", p.kda_head_dim},
          {"short_conv_kernel_size", p.conv_kernel},
          {"use_full_rank_gate", true},
          {"gate_lower_bound", -5.0},
          {"kda_layers", kda},
          {"full_attn_layers", mla}};
  J weights = {{"num_bits", 4},        {"type", "float"},   {"strategy", "group"},
               {"group_size", 32},     {"symmetric", true}, {"dynamic", false},
               {"observer", "minmax"}, {"scale_dtype", "torch.uint8"}};
  J quant = {{"quant_method", "compressed-tensors"},
             {"format", "mxfp4-pack-quantized"},
             {"quantization_status", "compressed"},
             {"config_groups",
              {{"group_0", {{"format", "mxfp4-pack-quantized"}, {"targets", {"Linear"}}, {"weights", weights}}}}}};
  J t = {{"model_type", "kimi_linear"},
         {"dtype", "bfloat16"},
         {"hidden_size", p.hidden},
         {"num_hidden_layers", p.num_layers},
         {"vocab_size", p.vocab},
         {"max_position_embeddings", p.max_positions},
         {"rms_norm_eps", 1e-5},
         {"hidden_act", "situ"},
         {"activation_situ_beta", 4.0},
         {"activation_situ_linear_beta", 25.0},
         {"intermediate_size", p.dense_inter},
         {"first_k_dense_replace", p.first_k_dense},
         {"moe_layer_freq", 1},
         {"num_experts", p.experts},
         {"num_experts_per_token", p.top_k},
         {"num_shared_experts", p.shared},
         {"moe_intermediate_size", p.expert_inter},
         {"routed_expert_hidden_size", p.latent},
         {"latent_moe_use_norm", true},
         {"moe_router_activation_func", "sigmoid"},
         {"topk_method", "noaux_tc"},
         {"moe_renormalize", true},
         {"routed_scaling_factor", 1.0},
         {"use_grouped_topk", true},
         {"num_expert_group", 1},
         {"topk_group", 1},
         {"num_attention_heads", p.mla_heads},
         {"num_key_value_heads", p.mla_heads},
         {"q_lora_rank", p.q_lora},
         {"kv_lora_rank", p.kv_lora},
         {"qk_nope_head_dim", p.qk_nope},
         {"qk_rope_head_dim", p.qk_rope},
         {"v_head_dim", p.v_head},
         {"mla_use_nope", true},
         {"mla_use_output_gate", true},
         {"attn_res_block_size", p.attn_res_block},
         {"num_nextn_predict_layers", 0},
         {"tie_word_embeddings", false},
         {"use_cache", true},
         {"bos_token_id", p.bos_id()},
         {"eos_token_id", p.eos_id()},
         {"pad_token_id", p.pad_id()},
         {"linear_attn_config", la},
         {"quantization_config", quant}};
  return J{{"model_type", "kimi_k3"},
           {"dtype", "bfloat16"},
           {"tie_word_embeddings", false},
           {"bos_token_id", p.bos_id()},
           {"eos_token_id", p.eos_id()},
           {"pad_token_id", p.pad_id()},
           {"deltafin_preset", p.name},
           {"text_config", t}};
}

nlohmann::ordered_json preset_generation_config_json(const ModelPreset& p) {
  return {{"bos_token_id", p.bos_id()}, {"eos_token_id", p.eos_id()}, {"pad_token_id", p.pad_id()}};
}

nlohmann::ordered_json preset_tokenizer_config_json(const ModelPreset& p) {
  using J = nlohmann::ordered_json;
  J decoder = J::object();
  for (int k = 0; k < 256; ++k) {
    decoder[std::to_string(p.text_ranks + k)] = {{"content", special_spelling(p.text_ranks, k)},
                                                 {"lstrip", false},
                                                 {"normalized", false},
                                                 {"rstrip", false},
                                                 {"single_word", false},
                                                 {"special", true}};
  }
  return J{{"added_tokens_decoder", decoder},
           {"bos_token", special_spelling(p.text_ranks, 0)},
           {"eos_token", special_spelling(p.text_ranks, 2)},
           {"pad_token", special_spelling(p.text_ranks, 255)},
           {"unk_token", special_spelling(p.text_ranks, 254)},
           {"model_max_length", p.max_positions},
           {"tokenizer_class", "TikTokenTokenizer"}};
}

std::string byte_level_rank_file() {
  static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (int b = 0; b < 256; ++b) {
    out += kB64[b >> 2];
    out += kB64[(b & 3) << 4];
    out += "== " + std::to_string(b) + "\n";
  }
  return out;
}

}  // namespace deltafin
