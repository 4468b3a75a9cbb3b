#include "checkpoint/qwen3_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/make_model.h"
#include "checkpoint/seeded_hash.h"
#include "core/mt19937_64.h"

namespace deltafin {

namespace {


constexpr std::string_view kScaleSuffix = "_scale_inv";

// A linear: [out, in] projection whose values are sized by fan-in. Only these
// are FP8 in an FP8 checkpoint (the router and lm_head stay BF16).
bool quantised_linear(const std::string& n) {
  if (n.find(".self_attn.") != std::string::npos) return n.find("_norm.") == std::string::npos;
  return n.ends_with("gate_proj.weight") || n.ends_with("up_proj.weight") || n.ends_with("down_proj.weight");
}

// The role of a tensor sets its distribution: centre + spread * U(-1, 1).
// Projections get variance 1/fan_in (unit-scale outputs), norms 1 +- 0.1,
// the embedding unit variance, lm_head twice a projection's spread (logits
// with a standard deviation of about 2, so greedy decoding has clear winners).
// A tied embedding is also the LM head: at unit variance a token's own row
// would outweigh what the layers add and greedy decoding would repeat the
// last token forever, so it gets an RMS of 0.1 (logits of about 1.6 RMS).
void distribution(const std::string& n, int64_t fan_in, bool tied, double& centre, double& spread) {
  centre = 0, spread = std::sqrt(3.0 / double(fan_in));
  if (n.ends_with("norm.weight")) centre = 1.0, spread = 0.1;
  else if (n.ends_with("embed_tokens.weight")) spread = (tied ? 0.1 : 1.0) * std::sqrt(3.0);
  else if (n.ends_with("lm_head.weight")) spread = 2.0 * std::sqrt(3.0 / double(fan_in));
}

std::vector<float> values(uint64_t seed, const std::string& name, uint64_t count, int64_t fan_in, bool tied) {
  Mt19937_64 rng(splitmix64(seed ^ splitmix64(fnv1a(name))));
  double centre, spread;
  distribution(name, fan_in, tied, centre, spread);
  std::vector<float> v(count);
  for (auto& x : v) {
    const double u = double(rng() >> 11) * 0x1.0p-52 - 1.0;  // [-1, 1), exact
    x = bf16_to_f32(f32_to_bf16(float(centre + spread * u)));
  }
  return v;
}

// Per 128x128 block: the scale (max|w| / 448, 1 for zeros) and, when `codes`
// is given, the E4M3 codes of w / scale.
void quantise_fp8(const std::vector<float>& w, int64_t rows, int64_t cols, std::vector<float>& scales,
                  uint8_t* codes) {
  const int64_t B = kFp8Block, br = (rows + B - 1) / B, bc = (cols + B - 1) / B;
  scales.assign(size_t(br * bc), 1.0f);
  for (int64_t i = 0; i < br; ++i)
    for (int64_t j = 0; j < bc; ++j) {
      const int64_t r1 = std::min(rows, (i + 1) * B), c1 = std::min(cols, (j + 1) * B);
      float m = 0;
      for (int64_t r = i * B; r < r1; ++r)
        for (int64_t c = j * B; c < c1; ++c) m = std::max(m, std::fabs(w[size_t(r * cols + c)]));
      const float s = m > 0 ? m / 448.0f : 1.0f;
      scales[size_t(i * bc + j)] = s;
      if (!codes) continue;
      for (int64_t r = i * B; r < r1; ++r)
        for (int64_t c = j * B; c < c1; ++c) codes[r * cols + c] = f32_to_e4m3(w[size_t(r * cols + c)] / s);
    }
}

void add(std::vector<std::vector<TensorSpec>>& g, const Qwen3Preset& p, std::string name, std::vector<int64_t> shape) {
  if (p.fp8 && quantised_linear(name)) {
    const int64_t B = kFp8Block;
    std::vector<int64_t> sshape = {(shape[0] + B - 1) / B, (shape[1] + B - 1) / B};
    std::string scale = name + std::string(kScaleSuffix);
    g.push_back({TensorSpec{std::move(name), DType::F8_E4M3, std::move(shape)},
                 TensorSpec{std::move(scale), DType::F32, std::move(sshape)}});
    return;
  }
  g.push_back({TensorSpec{std::move(name), DType::BF16, std::move(shape)}});
}

// The [out, in] shape of a linear of the preset, from its name.
std::pair<int64_t, int64_t> linear_shape(const Qwen3Preset& p, const std::string& n) {
  const int64_t H = p.hidden, Q = int64_t(p.heads) * p.head_dim, KV = int64_t(p.kv_heads) * p.head_dim;
  const int64_t I = n.find(".experts.") != std::string::npos ? p.moe_inter : p.inter;
  if (n.ends_with("q_proj.weight")) return {Q, H};
  if (n.ends_with("k_proj.weight") || n.ends_with("v_proj.weight")) return {KV, H};
  if (n.ends_with("o_proj.weight")) return {H, Q};
  if (n.ends_with("down_proj.weight")) return {H, I};
  return {I, H};  // gate_proj, up_proj
}

}  // namespace

std::vector<std::vector<TensorSpec>> qwen3_tensor_groups(const Qwen3Preset& p) {
  const int64_t H = p.hidden, D = p.head_dim, Q = int64_t(p.heads) * D, KV = int64_t(p.kv_heads) * D;
  std::vector<std::vector<TensorSpec>> g;
  add(g, p, "model.embed_tokens.weight", {p.vocab, H});
  for (int l = 0; l < p.num_layers; ++l) {
    const std::string pre = fmt::format("model.layers.{}.", l), a = pre + "self_attn.", m = pre + "mlp.";
    add(g, p, pre + "input_layernorm.weight", {H});
    add(g, p, a + "q_proj.weight", {Q, H});
    add(g, p, a + "k_proj.weight", {KV, H});
    add(g, p, a + "v_proj.weight", {KV, H});
    add(g, p, a + "o_proj.weight", {H, Q});
    add(g, p, a + "q_norm.weight", {D});
    add(g, p, a + "k_norm.weight", {D});
    add(g, p, pre + "post_attention_layernorm.weight", {H});
    if (p.is_moe_layer(l)) {
      add(g, p, m + "gate.weight", {p.experts, H});
      const int64_t I = p.moe_inter;
      for (int e = 0; e < p.experts; ++e) {
        const std::string x = fmt::format("{}experts.{}.", m, e);
        add(g, p, x + "gate_proj.weight", {I, H});
        add(g, p, x + "up_proj.weight", {I, H});
        add(g, p, x + "down_proj.weight", {H, I});
      }
    } else {
      add(g, p, m + "gate_proj.weight", {p.inter, H});
      add(g, p, m + "up_proj.weight", {p.inter, H});
      add(g, p, m + "down_proj.weight", {H, p.inter});
    }
  }
  add(g, p, "model.norm.weight", {H});
  if (!p.tie_embeddings) add(g, p, "lm_head.weight", {p.vocab, H});
  return g;
}

std::vector<float> qwen3_linear_values(uint64_t seed, const std::string& weight_name, int64_t rows, int64_t cols) {
  return values(seed, weight_name, uint64_t(rows * cols), cols, false);
}

// A metadata-only checkpoint leaves its data as holes, but an FP8 block scale
// of 0 is invalid (the loader refuses it): the small scale tensors get 1.0.
static Status write_unit_block_scales(const std::string& path, const std::vector<TensorSpec>& tensors) {
  const uint64_t data_start = 8 + safetensors_header(tensors).size();
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (!f) return error("{}: cannot open to write block scales", path);
  uint64_t at = data_start;
  bool ok = true;
  for (const TensorSpec& t : tensors) {
    if (t.name.ends_with("_scale_inv")) {
      const std::vector<float> ones(t.nbytes() / 4, 1.0f);
      ok = ok && std::fseek(f, long(at), SEEK_SET) == 0 && std::fwrite(ones.data(), 4, ones.size(), f) == ones.size();
    }
    at += t.nbytes();
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return error("{}: cannot write block scales", path);
  return {};
}

void fill_qwen3_tensor(const Qwen3Preset& p, uint64_t seed, const TensorSpec& t, std::span<uint8_t> out) {
  const bool is_scale = t.name.ends_with(kScaleSuffix);
  if (t.dtype == DType::F8_E4M3 || is_scale) {
    // Both records of an FP8 linear derive from the BF16 values of <name>.weight.
    const std::string base = is_scale ? t.name.substr(0, t.name.size() - kScaleSuffix.size()) : t.name;
    const auto [rows, cols] = is_scale ? linear_shape(p, base) : std::pair{t.shape[0], t.shape[1]};
    const auto w = qwen3_linear_values(seed, base, rows, cols);
    std::vector<float> scales;
    quantise_fp8(w, rows, cols, scales, is_scale ? nullptr : out.data());
    if (is_scale) std::memcpy(out.data(), scales.data(), std::min(out.size(), scales.size() * 4));
    return;
  }
  const uint64_t count = t.nbytes() / dtype_size(t.dtype);
  const auto v = values(seed, t.name, count, t.shape.size() >= 2 ? t.shape.back() : 1, p.tie_embeddings);
  for (uint64_t i = 0; i < count; ++i) {
    const uint16_t b = f32_to_bf16(v[i]);
    std::memcpy(out.data() + 2 * i, &b, 2);
  }
}

Status write_qwen3_checkpoint(const Qwen3Preset& p, const std::string& out_dir, uint64_t seed) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return error("{}: cannot create directory: {}", out_dir, ec.message());
  const fs::path dir(out_dir);
  std::vector<std::vector<TensorSpec>> shards;
  DF_ASSIGN(shards, split_into_shards(qwen3_tensor_groups(p), p.shards));
  const int n = int(shards.size());
  std::vector<std::string> names;
  for (int s = 0; s < n; ++s) names.push_back(shard_file_name(s + 1, n));
  TensorFill fill;
  if (!p.sparse) fill = [&](const TensorSpec& t, std::span<uint8_t> out) { fill_qwen3_tensor(p, seed, t, out); };
  for (int s = 0; s < n; ++s) {
    const fs::path path = dir / names[s], tmp = dir / (names[s] + ".tmp");
    DF_TRY(write_safetensors(tmp.string(), shards[s], fill));
    if (p.sparse) DF_TRY(write_unit_block_scales(tmp.string(), shards[s]));
    fs::rename(tmp, path, ec);
    if (ec) return error("{}: cannot rename to {}: {}", tmp.string(), path.string(), ec.message());
  }
  DF_TRY(write_safetensors_index((dir / "model.safetensors.index.json").string(), names, shards));
  DF_TRY(write_text(dir / "config.json", qwen3_config_json(p).dump(2) + "\n"));
  DF_TRY(write_text(dir / "generation_config.json", qwen3_generation_config_json(p).dump(2) + "\n"));
  return {};
}

}  // namespace deltafin
