// Grouped-query attention with RoPE and per-head q/k RMS norms (Qwen3):
//   q, k, v = x · Wq, Wk, Wv;  q_h = rms(q_h) ⊙ q_norm;  k_g = rms(k_g) ⊙ k_norm
//   rotate q and k by their positions (pairs i and i + head_dim/2);
//   o_h = Σ_j softmax_j(q_h · k_{g,j} / √head_dim) · v_{g,j},  g = h / (heads / kv_heads)
//   out = o · Wo
// The cache keeps rotated keys and values per position (session.h). Each
// (row, head) pair is computed whole by one thread, its sums over positions
// in order, so no value depends on T or on the thread count.
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec.h"
#include "model/layers.h"
#include "model/matrix_ops.h"

namespace deltafin::layers {

namespace {

// cos and sin of position `pos` for each rotated pair, in double, times the
// attention factor (YaRN's; 1 otherwise): angle_i = pos * inv_freq_i.
void rope_angles(const GqaConfig& g, int64_t pos, float* cos_out, float* sin_out) {
  const size_t half = size_t(g.head_dim) / 2;
  for (size_t i = 0; i < half; ++i) {
    const double a = double(pos) * g.inv_freq[i];
    cos_out[i] = float(std::cos(a) * g.attention_factor);
    sin_out[i] = float(std::sin(a) * g.attention_factor);
  }
}

// HF's rotate-half convention: (x_i, x_{i+half}) -> (x_i c - x_{i+half} s, x_{i+half} c + x_i s).
void rotate(float* x, size_t head_dim, const float* c, const float* s) {
  const size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * c[i] - b * s[i];
    x[i + half] = b * c[i] + a * s[i];
  }
}

}  // namespace

void gqa(const ModelConfig& cfg, const LayerWeights& w, KvLayerCache& cache, const float* x, size_t T, float* out,
         Workspace& ws, ThreadPool* pool) {
  const GqaConfig& g = cfg.gqa;
  const size_t NH = size_t(g.heads), NKV = size_t(g.kv_heads), D = size_t(g.head_dim), half = D / 2;
  const size_t QD = NH * D, KD = NKV * D, group = NH / NKV;
  const size_t P = size_t(pool->size());
  float* q = ws.gqa_q.take(T * QD);
  float* k = ws.gqa_k.take(T * KD);
  float* v = ws.gqa_v.take(T * KD);
  ops::matmul_group({{&w.q_proj, q}, {&w.k_proj, k}, {&w.v_proj, v}}, x, T, pool);

  // Norms and rotation, then the block's keys and values join the cache:
  // row t then sees exactly the positions <= its own, as in a T = 1 step.
  const size_t len0 = cache.length();
  float* rope = ws.gqa_rope.take(T * D);
  for (size_t t = 0; t < T; ++t) {
    float* c = rope + t * D;
    rope_angles(g, int64_t(len0 + t), c, c + half);
    for (size_t h = 0; h < NH; ++h) {
      float* qh = q + t * QD + h * D;
      if (g.qk_norm) ops::rms_norm(qh, w.q_norm.data(), D, cfg.rms_eps, qh);
      rotate(qh, D, c, c + half);
    }
    for (size_t h = 0; h < NKV; ++h) {
      float* kh = k + t * KD + h * D;
      if (g.qk_norm) ops::rms_norm(kh, w.k_norm.data(), D, cfg.rms_eps, kh);
      rotate(kh, D, c, c + half);
    }
  }
  cache.reserve(len0 + T);
  for (size_t t = 0; t < T; ++t) {
    std::copy(k + t * KD, k + (t + 1) * KD, cache.key(len0 + t));
    std::copy(v + t * KD, v + (t + 1) * KD, cache.value(len0 + t));
  }
  cache.set_length(len0 + T);

  const float scale = 1.0f / std::sqrt(float(D));
  float* o = ws.gqa_out.take(T * QD);
  const size_t pairs = T * NH;
  auto run = [&](size_t a, size_t b, ThreadScratch& ts) {
    float* s = ts.gqa_scores.take(len0 + T);
    for (size_t qi = a; qi < b; ++qi) {
      const size_t t = qi / NH, h = qi % NH, kv = h / group, npos = len0 + t + 1;
      const float* qh = q + t * QD + h * D;
      for (size_t j = 0; j < npos; ++j) s[j] = kernels::dot_f32(qh, cache.key(j) + kv * D, D) * scale;
      const float sum = ops::softmax_exp(s, npos);
      float* oh = o + t * QD + h * D;
      std::fill(oh, oh + D, 0.0f);
      for (size_t j = 0; j < npos; ++j) kernels::axpy(s[j] / sum, cache.value(j) + kv * D, oh, D);
    }
  };
  if (P == 1 || pairs < 2) {
    run(0, pairs, ws.threads[0]);
  } else {
    pool->parallel_for(P, 1, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) {
        const auto [a, b] = share(pairs, i, P);
        run(a, b, ws.threads[i]);
      }
    });
  }
  ops::matmul(w.o_proj, o, T, out, pool);
}

}  // namespace deltafin::layers
