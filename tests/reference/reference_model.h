// The reference path: a plain, obviously-correct Kimi K3 forward pass used
// only by tests to check the fast engine. Written independently of
// src/model/forward* and src/kernels/*: every weight is dequantised to fp32 up
// front, every sum accumulates in double, one position at a time, and MLA
// runs in the plain expanded form (per-head keys and values), not the latent
// form the engine uses. Slow on purpose; meant for the `tiny` test model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/config.h"

namespace deltafin::reference {

using Vec = std::vector<double>;

// A dense weight W[rows][cols] widened to fp32 (BF16 and MXFP4 decode exactly).
struct Mat {
  int rows = 0, cols = 0;
  std::vector<float> w;
  Vec apply(const Vec& x) const;  // y = W x, double accumulation
};

// ---- Primitives (exposed so the self-test can check them in isolation) ----

double sigmoid(double x);
// w ⊙ (x * rsqrt(mean(x^2) + eps)); an empty w means no weight (RMS0).
Vec rms_norm(const Vec& x, const Vec& w, double eps);
// x * rsqrt(sum(x^2) + 1e-6)
Vec l2_norm(const Vec& x);
// [beta·tanh(g/beta)·σ(g)] · [beta_lin·tanh(u/beta_lin)]
double situ(double g, double u, double beta, double beta_lin);
// AttnRes depth mixing: c = norm_w ⊙ proj; s_i = Σ_d RMS0(v_i)[d]·c[d];
// softmax over i; Σ_i α_i v_i (raw values).
Vec depth_mix(const std::vector<const Vec*>& values, const Vec& norm_w, const Vec& proj, double eps);
// Indices of the k largest entries, descending; equal values go to the lower index first.
std::vector<int> top_k(const Vec& choice, int k);
// Decodes an MXFP4 matrix: packed [rows][cols/2] (low nibble = even column),
// scales [rows][cols/32] (E8M0). Scale byte 255 is an error naming `what`.
Result<Mat> decode_mxfp4(const uint8_t* packed, const uint8_t* scales, int rows, int cols, const std::string& what);
// One KDA head step on state S[key][value] (row-major, dk x dv), in place:
// decay rows by exp(g[i]), delta-rule write with beta, then read with q.
Vec kda_head_step(std::vector<double>& S, int dk, int dv, const Vec& q, const Vec& k, const Vec& v, const Vec& g,
                  double beta);
// Causal softmax attention of one query over the cached keys/values of one
// head: Σ_s softmax(q·key_s · scale) value_s.
Vec attend(const Vec& q, const std::vector<Vec>& keys, const std::vector<Vec>& values, double scale);

// ---- Layer weights ----

struct KdaWeights {
  Mat q_proj, k_proj, v_proj, g_proj, f_a_proj, f_b_proj, b_proj, o_proj;
  Vec q_conv, k_conv, v_conv;  // [channels][kernel]
  Vec a_log;                   // [heads]
  Vec dt_bias;                 // [channels]
  Vec o_norm;                  // [head_dim]
};

struct MlaWeights {
  Mat q_a_proj, q_b_proj, kv_a_proj, kv_b_proj, g_proj, o_proj;
  Vec q_a_norm, kv_a_norm;
};

struct Expert {
  Mat w1, w2, w3;  // gate [inter][latent], down [latent][inter], up [inter][latent]
};

struct MoeWeights {
  Mat router, latent_down, latent_up, shared_gate, shared_up, shared_down;
  Vec correction_bias, latent_norm;
  std::vector<Expert> experts;
};

struct DenseWeights {
  Mat gate, up, down;
};

struct LayerWeights {
  Vec input_norm, post_attention_norm, attn_res_norm, attn_res_proj, mlp_res_norm, mlp_res_proj;
  KdaWeights kda;    // used when the layer is KDA
  MlaWeights mla;    // used when the layer is MLA
  DenseWeights dense;
  MoeWeights moe;
};

// ---- Per-layer state, carried position by position ----

struct KdaState {
  std::vector<double> win_q, win_k, win_v;  // [channels][kernel], oldest first
  std::vector<double> S;                    // [heads][dk][dv]
};

struct MlaState {
  std::vector<std::vector<Vec>> keys, values;  // [head][position] -> [qk_head] / [v_head]
};

// One token through the layers; each function reads only its own weights.
Vec kda_forward(const ModelConfig& c, const KdaWeights& w, KdaState& st, const Vec& x);
Vec mla_forward(const ModelConfig& c, const MlaWeights& w, MlaState& st, const Vec& x);
Vec dense_forward(const ModelConfig& c, const DenseWeights& w, const Vec& x);
Vec moe_forward(const ModelConfig& c, const MoeWeights& w, const Vec& x);

// ---- The model ----

struct ReferenceRun {
  std::vector<int32_t> tokens;             // generated ids
  std::vector<std::vector<float>> logits;  // per decided step, [vocab]
  std::vector<double> margins;             // per step: top-1 minus top-2 logit (double)
};

class ReferenceModel {
 public:
  static Result<ReferenceModel> load(const std::string& dir);

  const ModelConfig& config() const { return cfg_; }
  // Greedy decode from scratch: feeds the prompt one position at a time, then
  // emits max_new tokens (argmax, ties to the lowest id), feeding each back.
  Result<ReferenceRun> greedy(const std::vector<int32_t>& prompt, int max_new) const;
  // Logits (double) after each position of a fixed token sequence.
  Result<std::vector<Vec>> score(const std::vector<int32_t>& tokens) const;

 private:
  struct State;
  State new_state() const;
  Result<Vec> step(State& st, int32_t token) const;  // logits for the next position

  ModelConfig cfg_;
  Mat embed, lm_head;
  Vec final_norm, out_res_norm, out_res_proj;
  std::vector<LayerWeights> layers_;
};

}  // namespace deltafin::reference
