// The spine's weights bound by name from a checkpoint and checked against the
// config: large matrices are views into the mapped shards; small vectors (norm
// weights, gates, conv kernels) are widened once to fp32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/config.h"

namespace deltafin {

// A BF16, F32, row-int8 (I8 + one F16 scale per row, core/row_int8.h) or
// FP8 block (e4m3 + F32 scales per 128 x 128 block) matrix [rows, cols],
// row-major, viewed in place.
struct Matrix {
  DType dtype = DType::BF16;
  int rows = 0, cols = 0;
  const void* data = nullptr;
  const uint16_t* row_scales = nullptr;  // I8 only: F16 [rows]
  const float* block_scales = nullptr;   // F8_E4M3 only: F32 [ceil(rows/128), ceil(cols/128)]
  const std::string* name = nullptr;
  const uint16_t* bf16() const { return static_cast<const uint16_t*>(data); }
  const float* f32() const { return static_cast<const float*>(data); }
  const int8_t* i8() const { return static_cast<const int8_t*>(data); }
  // Row r widened exactly to fp32 (the weights the kernels multiply by).
  void row_f32(size_t r, float* out) const;
};

struct LayerWeights {
  AttentionKind attention;
  FfnKind ffn;
  // AttnRes scaffolding and the two layer norms, fp32 [hidden].
  std::vector<float> input_norm, post_attention_norm;
  std::vector<float> attn_res_norm, attn_res_proj, mlp_res_norm, mlp_res_proj;

  // KDA (attention == KDA).
  Matrix q_proj, k_proj, v_proj, g_proj, f_a_proj, f_b_proj, b_proj, o_proj;
  std::vector<float> q_conv, k_conv, v_conv;  // [channels][kernel]
  std::vector<float> a_log;                   // [heads] (padding checked to be zero)
  std::vector<float> dt_bias;                 // [channels]
  std::vector<float> o_norm;                  // [head_dim]

  // MLA (attention == MLA). o_proj and g_proj above are shared names.
  Matrix q_a_proj, q_b_proj, kv_a_proj, kv_b_proj;
  std::vector<float> q_a_norm, kv_a_norm;

  // GQA (attention == GQA): q_proj, k_proj, v_proj, o_proj above, and the
  // per-head RMS norm weights of queries and keys [head_dim].
  std::vector<float> q_norm, k_norm;

  // Dense FFN (ffn == Dense).
  Matrix gate_proj, up_proj, down_proj;

  // MoE spine (ffn == MoE).
  Matrix router, latent_down, latent_up, shared_gate, shared_up, shared_down;
  std::vector<float> correction_bias;  // [experts]
  std::vector<float> latent_norm;      // [latent]
};

struct ModelWeights {
  Matrix embed;    // BF16 [vocab, hidden] (always: tokens read its rows)
  Matrix lm_head;  // BF16 or row-int8 [vocab, hidden]; the embedding when tied
  size_t int8_matrices = 0;  // how many matrices are row-int8 (0: the spine is weight-exact)
  std::vector<float> final_norm, out_res_norm, out_res_proj;
  std::vector<LayerWeights> layers;

  // check_values = false checks names, dtypes and shapes only (a checkpoint
  // whose shard data is not downloaded yet: setup streams it to prepare).
  static Result<ModelWeights> bind(const Checkpoint& ck, const ModelConfig& cfg, bool check_values = true);
};

// Name of a routed expert tensor: part is "w1"/"w2"/"w3", kind "weight_packed"/"weight_scale".
std::string expert_tensor_name(int layer, int expert, const char* part, const char* kind);
std::string layer_prefix(int layer);  // "language_model.model.layers.{l}."

}  // namespace deltafin
