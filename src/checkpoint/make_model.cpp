#include "checkpoint/make_model.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <algorithm>
#include <bit>

#include "checkpoint/expert_generator.h"
#include "checkpoint/seeded_hash.h"
#include "core/files.h"
#include "core/mt19937_64.h"

namespace deltafin {

namespace {

std::string lp(int l) { return fmt::format("language_model.model.layers.{}.", l); }

void add(std::vector<TensorGroup>& g, std::string name, DType dt, std::vector<int64_t> shape) {
  g.push_back({TensorSpec{std::move(name), dt, std::move(shape)}});
}

void add_layer(const ModelPreset& p, int l, std::vector<TensorGroup>& g) {
  const int64_t H = p.hidden;
  const std::string pre = lp(l);
  for (const char* n : {"input_layernorm", "post_attention_layernorm", "self_attention_res_norm"})
    add(g, pre + n + ".weight", DType::BF16, {H});
  add(g, pre + "self_attention_res_proj.weight", DType::BF16, {1, H});
  add(g, pre + "mlp_res_norm.weight", DType::BF16, {H});
  add(g, pre + "mlp_res_proj.weight", DType::BF16, {1, H});

  const std::string a = pre + "self_attn.";
  if (!p.is_mla(l)) {
    const int64_t C = int64_t(p.kda_heads) * p.kda_head_dim, D = p.kda_head_dim, K = p.conv_kernel;
    for (const char* n : {"q_proj", "k_proj", "v_proj", "g_proj"}) add(g, a + n + ".weight", DType::BF16, {C, H});
    add(g, a + "f_a_proj.weight", DType::BF16, {D, H});
    add(g, a + "f_b_proj.weight", DType::BF16, {C, D});
    add(g, a + "b_proj.weight", DType::BF16, {p.kda_heads, H});
    add(g, a + "o_proj.weight", DType::BF16, {H, C});
    for (const char* n : {"q_conv1d", "k_conv1d", "v_conv1d"}) add(g, a + n + ".weight", DType::F32, {C, 1, K});
    add(g, a + "A_log", DType::F32, {p.a_log_len});
    add(g, a + "dt_bias", DType::F32, {C});
    add(g, a + "o_norm.weight", DType::F32, {D});
  } else {
    const int64_t Nh = p.mla_heads;
    add(g, a + "q_a_proj.weight", DType::BF16, {p.q_lora, H});
    add(g, a + "q_a_layernorm.weight", DType::BF16, {p.q_lora});
    add(g, a + "q_b_proj.weight", DType::BF16, {Nh * (p.qk_nope + p.qk_rope), p.q_lora});
    add(g, a + "kv_a_proj_with_mqa.weight", DType::BF16, {p.kv_lora + p.qk_rope, H});
    add(g, a + "kv_a_layernorm.weight", DType::BF16, {p.kv_lora});
    add(g, a + "kv_b_proj.weight", DType::BF16, {Nh * (p.qk_nope + p.v_head), p.kv_lora});
    add(g, a + "g_proj.weight", DType::BF16, {Nh * p.v_head, H});
    add(g, a + "o_proj.weight", DType::BF16, {H, Nh * p.v_head});
  }

  if (!p.is_moe(l)) {
    add(g, pre + "mlp.gate_proj.weight", DType::BF16, {p.dense_inter, H});
    add(g, pre + "mlp.up_proj.weight", DType::BF16, {p.dense_inter, H});
    add(g, pre + "mlp.down_proj.weight", DType::BF16, {H, p.dense_inter});
    return;
  }
  const std::string s = pre + "block_sparse_moe.";
  const int64_t SI = int64_t(p.shared) * p.expert_inter, Lt = p.latent;
  add(g, s + "gate.weight", DType::BF16, {p.experts, H});
  add(g, s + "gate.e_score_correction_bias", DType::F32, {p.experts});
  add(g, s + "routed_expert_down_proj.weight", DType::BF16, {Lt, H});
  add(g, s + "routed_expert_norm.weight", DType::BF16, {Lt});
  add(g, s + "routed_expert_up_proj.weight", DType::BF16, {H, Lt});
  add(g, s + "shared_experts.gate_proj.weight", DType::BF16, {SI, H});
  add(g, s + "shared_experts.up_proj.weight", DType::BF16, {SI, H});
  add(g, s + "shared_experts.down_proj.weight", DType::BF16, {H, SI});
  for (int e = 0; e < p.experts; ++e) g.push_back(expert_tensor_group(p, l, e));
}


// Uniform in [-1, 1) from 53 random bits; exact, so identical on every machine.
double uniform_pm1(Mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-52 - 1.0; }

}  // namespace

TensorGroup expert_tensor_group(const ModelPreset& p, int layer, int expert) {
  const int64_t Lt = p.latent, I = p.expert_inter;
  TensorGroup ex;
  for (const char* part : {"w1", "w2", "w3"}) {
    const int64_t rows = part[1] == '2' ? Lt : I, cols = part[1] == '2' ? I : Lt;
    const std::string base = fmt::format("{}block_sparse_moe.experts.{}.{}.", lp(layer), expert, part);
    ex.push_back({base + "weight_packed", DType::U8, {rows, cols / 2}});
    ex.push_back({base + "weight_scale", DType::U8, {rows, cols / 32}});
  }
  return ex;
}

std::vector<TensorGroup> preset_tensor_groups(const ModelPreset& p) {
  std::vector<TensorGroup> g;
  add(g, "language_model.model.embed_tokens.weight", DType::BF16, {p.vocab, p.hidden});
  for (int l = 0; l < p.num_layers; ++l) add_layer(p, l, g);
  add(g, "language_model.model.norm.weight", DType::BF16, {p.hidden});
  add(g, "language_model.model.output_attn_res_norm.weight", DType::BF16, {p.hidden});
  add(g, "language_model.model.output_attn_res_proj.weight", DType::BF16, {1, p.hidden});
  add(g, "language_model.lm_head.weight", DType::BF16, {p.vocab, p.hidden});
  return g;
}

Result<std::vector<std::vector<TensorSpec>>> split_into_shards(const std::vector<TensorGroup>& groups, int shards) {
  if (shards < 1) return error("shard count {} must be positive", shards);
  uint64_t total = 0;
  for (const auto& g : groups)
    for (const auto& t : g) total += t.nbytes();
  std::vector<std::vector<TensorSpec>> out(shards);
  uint64_t pos = 0;
  for (const auto& g : groups) {
    // The shard whose byte range holds the group's first byte.
    const size_t s = total ? size_t((unsigned __int128)pos * unsigned(shards) / total) : 0;
    for (const auto& t : g) {
      out[s].push_back(t);
      pos += t.nbytes();
    }
  }
  for (int s = 0; s < shards; ++s)
    if (out[s].empty()) return error("cannot split {} bytes into {} non-empty shards", total, shards);
  return out;
}

void fill_random_tensor(const ModelPreset& p, uint64_t seed, const TensorSpec& t, std::span<uint8_t> out) {
  Mt19937_64 rng(splitmix64(seed ^ splitmix64(fnv1a(t.name))));
  const std::string& n = t.name;
  if (n.ends_with("weight_packed")) {  // random E2M1 nibbles: each engine word, little-endian
    uint64_t words[256];
    size_t i = 0;
    while (out.size() - i >= 8) {
      const size_t count = std::min<size_t>(256, (out.size() - i) / 8);
      rng.fill(words, count);
      if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(out.data() + i, words, count * 8);
      } else {
        for (size_t w = 0; w < count; ++w)
          for (size_t k = 0; k < 8; ++k) out[i + 8 * w + k] = uint8_t(words[w] >> (8 * k));
      }
      i += count * 8;
    }
    if (i < out.size()) {
      const uint64_t r = rng();
      for (size_t k = 0; i + k < out.size(); ++k) out[i + k] = uint8_t(r >> (8 * k));
    }
    return;
  }
  if (n.ends_with("weight_scale")) {
    // Centre the E8M0 exponent so W·x keeps unit scale: the RMS of a random
    // E2M1 element is about 2.93, times sqrt(fan_in) terms.
    const double fan_in = double(t.shape[1]) * 32;
    const int centre = 127 - int(std::lround(std::log2(2.93 * std::sqrt(fan_in))));
    for (auto& b : out) b = uint8_t(centre - 2 + int(rng() % 5));
    return;
  }
  const uint64_t count = t.nbytes() / dtype_size(t.dtype);
  const double fan_in = t.shape.size() >= 2 ? double(t.shape.back()) : 1.0;
  const double H = p.hidden;
  // value = centre + spread * U(-1, 1), chosen once per tensor from its role.
  double centre = 0, spread = std::sqrt(3.0 / fan_in);  // [out, in] projection: unit-scale outputs
  uint64_t live = count;                                 // entries past `live` are zero padding
  if (n.ends_with(".A_log")) centre = 1.35, spread = 1.35, live = uint64_t(p.kda_heads);  // log(1..15)
  else if (n.ends_with(".dt_bias")) spread = 0.5;
  else if (n.ends_with("conv1d.weight")) spread = std::sqrt(3.0 / p.conv_kernel);
  else if (n.ends_with("e_score_correction_bias")) spread = 0.02;
  else if (n.ends_with("norm.weight")) centre = 1.0, spread = 0.1;
  else if (n.ends_with("_res_proj.weight")) spread = std::sqrt(3.0 / H);
  else if (n.ends_with("embed_tokens.weight")) spread = 1.0;
  else if (n.ends_with("lm_head.weight")) spread = 2.0 * std::sqrt(3.0 / H);
  auto value = [&](uint64_t i) -> double {
    const double u = uniform_pm1(rng);
    return i < live ? centre + spread * u : 0.0;
  };
  // The token ring (ModelPreset::route_persist, docs/guide/drives-and-ram-tier.md). Text
  // token i (of R = text_ranks) gets two unit-variance vectors from their own
  // generator, the same in both tensors: a point on a smooth closed curve,
  // ring_i[d] = sum over k = 1..8 of a_dk cos(2 pi k i / R) + b_dk sin(...),
  // and a plain random identity id_i. Its embedding row is
  // kRingGain x (sqrt(W) ring_i + sqrt(1 - W) id_i), large enough to outweigh
  // what the layers add to the residual stream (64 was not: with larger
  // experts the walk broke off and looped), and lm_head row i + 1 is
  // id_i: greedy decoding walks i, i + 1, i + 2, ... while consecutive
  // tokens, neighbours on the ring, enter every router alike.
  constexpr int kRingHarmonics = 8;
  constexpr double kRingGain = 512;
  const bool embed = n.ends_with("embed_tokens.weight"), head = n.ends_with("lm_head.weight");
  const int64_t R = p.text_ranks, Hd = p.hidden;
  std::vector<double> ring, ids;  // [R, H] each
  if (p.route_persist > 0 && (embed || head) && R > 1) {
    Mt19937_64 ring_rng(splitmix64(seed ^ splitmix64(fnv1a("route_persist ring"))));
    std::vector<double> ab(size_t(Hd) * kRingHarmonics * 2);
    for (auto& x : ab) x = std::sqrt(3.0) * uniform_pm1(ring_rng);
    ring.resize(size_t(R * Hd));
    for (int64_t i = 0; i < R; ++i)
      for (int64_t d = 0; d < Hd; ++d) {
        double x = 0;
        for (int k = 1; k <= kRingHarmonics; ++k) {
          const double th = 2 * M_PI * double(k) * double(i) / double(R);
          const size_t at = size_t((d * kRingHarmonics + k - 1) * 2);
          x += ab[at] * std::cos(th) + ab[at + 1] * std::sin(th);
        }
        ring[size_t(i * Hd + d)] = x / std::sqrt(double(kRingHarmonics));
      }
    ids.resize(size_t(R * Hd));
    for (auto& x : ids) x = std::sqrt(3.0) * uniform_pm1(ring_rng);
  }
  auto ring_value = [&](uint64_t i, double plain) {
    const int64_t row = int64_t(i) / Hd, d = int64_t(i) % Hd;
    if (row >= R) return plain;  // the special tokens keep their plain rows
    const double rms = spread / std::sqrt(3.0);  // the plain rows' RMS
    const double w = p.route_persist;
    if (embed) return kRingGain * rms * (std::sqrt(w) * ring[size_t(row * Hd + d)] + std::sqrt(1 - w) * ids[size_t(row * Hd + d)]);
    return rms * ids[size_t(((row + R - 1) % R) * Hd + d)];
  };
  const bool skewed = p.route_skew > 0 && n.ends_with("e_score_correction_bias");
  for (uint64_t i = 0; i < count; ++i) {
    double x = ring.empty() ? value(i) : ring_value(i, value(i));
    if (skewed) x += p.route_skew * (-std::log(1.0 - 0.5 * (uniform_pm1(rng) + 1.0) * 0.999999999) - std::log(2.0));
    const float v = float(x);
    if (t.dtype == DType::BF16) {
      const uint16_t b = f32_to_bf16(v);
      std::memcpy(out.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
  }
}

namespace {

// A spine-only checkpoint gets one shard per layer (plus the embedding and the
// tail): the store's spine-pack layout, so `prepare` hard-links these files
// into the store instead of copying them.
std::vector<std::vector<TensorSpec>> spine_shards_by_layer(const ModelPreset& p) {
  constexpr std::string_view kLayers = "language_model.model.layers.";
  std::map<int, std::vector<TensorSpec>> by_layer;  // -1: embedding, INT_MAX: tail
  for (const TensorGroup& g : preset_tensor_groups(p)) {
    if (g.size() != 1) continue;  // a routed expert
    const std::string& n = g[0].name;
    int key = n.find("embed_tokens") != std::string::npos ? -1 : INT_MAX;
    if (n.starts_with(kLayers)) key = std::stoi(n.substr(kLayers.size()));
    by_layer[key].push_back(g[0]);
  }
  std::vector<std::vector<TensorSpec>> out;
  for (auto& [key, specs] : by_layer) out.push_back(std::move(specs));
  return out;
}

bool spine_checkpoint_complete(const std::filesystem::path& dir, const std::string& record,
                               const std::vector<std::vector<TensorSpec>>& shards, int digits) {
  auto text = read_file((dir / kExpertGeneratorFile).string());
  if (!text.ok() || *text != record) return false;
  std::error_code ec;
  for (size_t s = 0; s < shards.size(); ++s) {
    uint64_t bytes = 8 + safetensors_header(shards[s]).size();
    for (const auto& t : shards[s]) bytes += t.nbytes();
    const auto path = dir / shard_file_name(int(s) + 1, int(shards.size()), digits);
    if (std::filesystem::file_size(path, ec) != bytes || ec) return false;
  }
  return true;
}

}  // namespace

Status make_model(const ModelPreset& p, const std::string& out_dir, uint64_t seed, ExpertOutput experts) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return error("{}: cannot create directory: {}", out_dir, ec.message());
  const fs::path dir(out_dir);

  std::vector<std::vector<TensorSpec>> shards;
  const std::string record = ExpertGenerator{p, seed}.record_json();
  if (experts == ExpertOutput::GeneratorRecord) {
    if (p.sparse) return error("preset {}: has no weights to generate experts from", p.name);
    shards = spine_shards_by_layer(p);
    // The record is removed first and written last, so its presence with the
    // same contents means every file below is complete: a rerun (resuming a
    // killed make-model --store) keeps the files a store may share.
    if (spine_checkpoint_complete(dir, record, shards, p.shard_digits)) return {};
    fs::remove(dir / kExpertGeneratorFile, ec);
  } else {
    DF_ASSIGN(shards, split_into_shards(preset_tensor_groups(p), p.shards));
    fs::remove(dir / kExpertGeneratorFile, ec);  // a stale record would stand for experts the shards now hold
  }
  const int shard_count = int(shards.size());
  std::vector<std::string> names;
  for (int s = 0; s < shard_count; ++s) names.push_back(shard_file_name(s + 1, shard_count, p.shard_digits));
  TensorFill fill;
  if (!p.sparse) fill = [&](const TensorSpec& t, std::span<uint8_t> out) { fill_random_tensor(p, seed, t, out); };
  // Temp name + rename: a rerun makes new files, never rewrites ones a store may have linked.
  for (int s = 0; s < shard_count; ++s) {
    const fs::path path = dir / names[s], tmp = dir / (names[s] + ".tmp");
    DF_TRY(write_safetensors(tmp.string(), shards[s], fill));
    fs::rename(tmp, path, ec);
    if (ec) return error("{}: cannot rename to {}: {}", tmp.string(), path.string(), ec.message());
  }
  DF_TRY(write_safetensors_index((dir / "model.safetensors.index.json").string(), names, shards));

  DF_TRY(write_text(dir / "config.json", preset_config_json(p).dump(2) + "\n"));
  DF_TRY(write_text(dir / "generation_config.json", preset_generation_config_json(p).dump(2) + "\n"));
  DF_TRY(write_text(dir / "tokenizer_config.json", preset_tokenizer_config_json(p).dump(2) + "\n"));
  if (p.write_rank_file) DF_TRY(write_text(dir / "tiktoken.model", byte_level_rank_file()));
  if (experts == ExpertOutput::GeneratorRecord) DF_TRY(write_text(dir / kExpertGeneratorFile, record));
  return {};
}

}  // namespace deltafin
