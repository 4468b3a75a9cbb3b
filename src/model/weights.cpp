#include "model/weights.h"

#include <cmath>
#include <cstring>

#include "core/row_int8.h"

namespace deltafin {

std::string layer_prefix(int layer) { return fmt::format("language_model.model.layers.{}.", layer); }

std::string expert_tensor_name(int layer, int expert, const char* part, const char* kind) {
  return fmt::format("language_model.model.layers.{}.block_sparse_moe.experts.{}.{}.{}", layer, expert, part, kind);
}

void Matrix::row_f32(size_t r, float* out) const {
  const size_t n = size_t(cols);
  if (dtype == DType::I8) {
    const int8_t* q = i8() + r * n;
    const float s = f16_to_f32(row_scales[r]);
    for (size_t c = 0; c < n; ++c) out[c] = float(q[c]) * s;
  } else if (dtype == DType::BF16) {
    const uint16_t* w = bf16() + r * n;
    for (size_t c = 0; c < n; ++c) out[c] = bf16_to_f32(w[c]);
  } else {
    std::memcpy(out, f32() + r * n, n * sizeof(float));
  }
}

namespace {

struct Binder {
  const Checkpoint& ck;
  size_t int8_matrices = 0;

  // BF16, or row-int8 (I8 plus its F16 [rows] scale tensor) when `int8_ok`.
  Result<Matrix> matrix(const std::string& name, int rows, int cols, bool int8_ok = true) {
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    const TensorInfo* found = ck.find(name);
    if (int8_ok && found && found->dtype == DType::I8) {
      DF_ASSIGN(const TensorInfo* t, ck.require(name, DType::I8, {rows, cols}));
      const std::string sn = row_int8_scale_name(name);
      DF_ASSIGN(const TensorInfo* s, ck.require(sn, DType::F16, {rows}));
      if (reinterpret_cast<uintptr_t>(s->data) % alignof(uint16_t) != 0)
        return error("{}: tensor '{}': F16 data at an odd byte offset", *s->file, sn);
      const uint16_t* sc = reinterpret_cast<const uint16_t*>(s->data);
      for (int r = 0; r < rows; ++r) {
        uint16_t h;
        std::memcpy(&h, sc + r, 2);
        const float f = f16_to_f32(h);
        if (!std::isfinite(f) || f <= 0.0f)
          return error("{}: tensor '{}': row {} scale {} (must be finite and positive)", *s->file, sn, r, f);
      }
      m.dtype = DType::I8;
      m.data = t->data;
      m.row_scales = sc;
      m.name = &t->name;
      ++int8_matrices;
      return m;
    }
    DF_ASSIGN(const TensorInfo* t, ck.require(name, DType::BF16, {rows, cols}));
    m.dtype = DType::BF16;
    m.data = t->data;
    m.name = &t->name;
    return m;
  }

  // A small tensor widened to fp32; `shape` is checked exactly, dtype must be `dtype`.
  Result<std::vector<float>> vec(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
    DF_ASSIGN(const TensorInfo* t, ck.require(name, dtype, shape));
    std::vector<float> out(t->numel());
    if (dtype == DType::BF16) {
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t b;
        std::memcpy(&b, t->data + 2 * i, 2);
        out[i] = bf16_to_f32(b);
      }
    } else {
      std::memcpy(out.data(), t->data, out.size() * 4);
    }
    return out;
  }
};

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

Result<ModelWeights> ModelWeights::bind(const Checkpoint& ck, const ModelConfig& c) {
  Binder b{ck};
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
