#include "checkpoint/dspark_writer.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/mt19937_64.h"

namespace deltafin {

namespace {

uint64_t mix64(uint64_t x) {  // SplitMix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}


// Values by role, so a random DSpark still behaves like a network: norms
// near one, unit-scale projections, a Markov bias of about unit size.
void fill(const DsparkShape& s, uint64_t seed, const TensorSpec& t, std::span<uint8_t> out) {
  Mt19937_64 rng(mix64(seed ^ mix64(name_hash(t.name))));
  double centre = 0, spread = std::sqrt(3.0 / double(t.shape.back()));
  if (t.name.ends_with("norm.weight")) centre = 1.0, spread = 0.1;
  else if (t.name.find("markov_w") != std::string::npos) spread = std::sqrt(3.0 / std::sqrt(double(s.markov_rank)));
  else if (t.name.ends_with(".bias")) spread = 0.1;
  const uint64_t n = t.nbytes() / 2;
  for (uint64_t i = 0; i < n; ++i) {
    const double u = double(rng() >> 11) * 0x1.0p-52 - 1.0;
    const uint16_t b = f32_to_bf16(float(centre + spread * u));
    std::memcpy(out.data() + 2 * i, &b, 2);
  }
}

}  // namespace

DsparkShape dspark_shape_for(const ModelConfig& t) {
  DsparkShape s;
  s.hidden = t.hidden, s.vocab = t.vocab;
  s.heads = std::max(2, t.hidden / 64);
  s.q_lora = std::max(32, t.hidden / 4), s.kv_lora = std::max(32, t.hidden / 4);
  s.inter = 2 * t.hidden;
  s.mask_token_id = t.vocab - 3;
  const int n = std::clamp(t.num_layers - 1, 2, 5);
  for (int i = 0; i < n; ++i) s.target_layers.push_back(int((i + 0.5) * t.num_layers / n));
  return s;
}

nlohmann::ordered_json dspark_config_json(const DsparkShape& s) {
  nlohmann::ordered_json j;
  j["architectures"] = {"K3DSparkModel"};
  j["model_type"] = "k3_dspark";
  j["hidden_size"] = s.hidden;
  j["num_hidden_layers"] = s.layers;
  j["num_attention_heads"] = s.heads;
  j["q_lora_rank"] = s.q_lora;
  j["kv_lora_rank"] = s.kv_lora;
  j["qk_nope_head_dim"] = s.nope;
  j["qk_rope_head_dim"] = s.rope;
  j["v_head_dim"] = s.v_head;
  j["mla_use_nope"] = false;
  j["mla_use_output_gate"] = false;
  j["intermediate_size"] = s.inter;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = 1e-5;
  j["vocab_size"] = s.vocab;
  j["rope_theta"] = s.rope_theta;
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", s.yarn_factor},
                       {"original_max_position_embeddings", s.original_max_positions},
                       {"beta_fast", 32},
                       {"beta_slow", 1},
                       {"mscale", 1.0},
                       {"mscale_all_dim", 1.0}};
  j["dflash_config"] = {{"block_size", s.block_size}, {"mask_token_id", s.mask_token_id},
                        {"target_layer_ids", s.target_layers}};
  j["markov_rank"] = s.markov_rank;
  j["markov_head_type"] = "vanilla";
  j["enable_confidence_head"] = true;
  j["confidence_head_with_markov"] = true;
  j["tie_word_embeddings"] = false;
  j["dtype"] = "bfloat16";
  return j;
}

std::vector<TensorSpec> dspark_tensors(const DsparkShape& s) {
  const int64_t H = s.hidden, NH = s.heads;
  std::vector<TensorSpec> t;
  auto add = [&](std::string name, std::vector<int64_t> shape) { t.push_back({std::move(name), DType::BF16, shape}); };
  add("context_proj.weight", {H, int64_t(s.target_layers.size()) * H});
  add("context_norm.weight", {H});
  for (int j = 0; j < s.layers; ++j) {
    const std::string p = fmt::format("layers.{}.", j), a = p + "self_attn.";
    add(p + "input_layernorm.weight", {H});
    add(a + "q_a_proj.weight", {s.q_lora, H});
    add(a + "q_a_layernorm.weight", {s.q_lora});
    add(a + "q_b_proj.weight", {NH * (s.nope + s.rope), s.q_lora});
    add(a + "kv_a_proj_with_mqa.weight", {s.kv_lora + s.rope, H});
    add(a + "kv_a_layernorm.weight", {s.kv_lora});
    add(a + "kv_b_proj.weight", {NH * (s.nope + s.v_head), s.kv_lora});
    add(a + "o_proj.weight", {H, NH * s.v_head});
    add(p + "post_attention_layernorm.weight", {H});
    add(p + "mlp.gate_proj.weight", {s.inter, H});
    add(p + "mlp.up_proj.weight", {s.inter, H});
    add(p + "mlp.down_proj.weight", {H, s.inter});
  }
  add("final_norm.weight", {H});
  add("markov_head.markov_w1.weight", {s.vocab, s.markov_rank});
  add("markov_head.markov_w2.weight", {s.vocab, s.markov_rank});
  add("confidence_head.proj.weight", {1, H + s.markov_rank});
  add("confidence_head.proj.bias", {1});
  add("embed_tokens.weight", {s.vocab, H});  // in the release too; the target's embedding is used
  return t;
}

Status write_dspark_checkpoint(const DsparkShape& s, const std::string& out_dir, uint64_t seed) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return error("{}: cannot create directory: {}", out_dir, ec.message());
  const fs::path dir(out_dir);
  const auto tensors = dspark_tensors(s);
  const fs::path tmp = dir / "model.safetensors.tmp";
  DF_TRY(write_safetensors(tmp.string(), tensors,
                           [&](const TensorSpec& t, std::span<uint8_t> out) { fill(s, seed, t, out); }));
  fs::rename(tmp, dir / "model.safetensors", ec);
  if (ec) return error("{}: cannot rename: {}", tmp.string(), ec.message());
  std::ofstream f(dir / "config.json", std::ios::binary | std::ios::trunc);
  f << dspark_config_json(s).dump(2) << "\n";
  f.close();
  if (!f) return error("{}: write failed", (dir / "config.json").string());
  return {};
}

}  // namespace deltafin
