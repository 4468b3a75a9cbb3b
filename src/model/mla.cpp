// Gated NoPE MLA with the latent cache and absorbed attention (spec §2.5,
// ARCHITECTURE §5): the cache keeps the normalised kv latent (kv_lora_rank)
// and the shared rope key per position. The query's nope part is absorbed
// through kv_b's key rows, scores are taken against latents, and the value
// rows of kv_b are applied to the attention-weighted latent.
#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "model/layer_ops.h"
#include "model/layers.h"

namespace deltafin::layers {

void mla(const ModelConfig& cfg, const LayerWeights& w, MlaLayerCache& cache, int64_t start_pos, const float* x,
         size_t T, float* out, Scratch& s, ThreadPool* pool) {
  const auto& m = cfg.mla;
  const size_t NH = m.heads, QR = m.q_lora_rank, KVR = m.kv_lora_rank, NOPE = m.qk_nope_dim,
               ROPE = m.qk_rope_dim, V = m.v_head_dim, QD = m.qk_head_dim(), KVB = NOPE + V;
  float* cq = Scratch::take(s.a, T * QR);
  float* q = Scratch::take(s.b, T * NH * QD);
  float* ckv = Scratch::take(s.c, T * (KVR + ROPE));
  float* gate = Scratch::take(s.d, T * NH * V);
  float* o = Scratch::take(s.e, T * NH * V);
  ops::matmul(w.q_a_proj, x, T, cq, pool);
  for (size_t t = 0; t < T; ++t) ops::rms_norm(cq + t * QR, w.q_a_norm.data(), QR, cfg.rms_eps, cq + t * QR);
  ops::matmul(w.q_b_proj, cq, T, q, pool);
  ops::matmul(w.kv_a_proj, x, T, ckv, pool);
  ops::matmul(w.g_proj, x, T, gate, pool);

  // Append every row's latent and rope key first: row t then sees exactly the
  // positions <= its own, as it would in a T = 1 step.
  const size_t len0 = size_t(start_pos);
  cache.latent.resize((len0 + T) * KVR);
  cache.rope_key.resize((len0 + T) * ROPE);
  for (size_t t = 0; t < T; ++t) {
    const float* row = ckv + t * (KVR + ROPE);
    ops::rms_norm(row, w.kv_a_norm.data(), KVR, cfg.rms_eps, cache.latent.data() + (len0 + t) * KVR);
    std::copy(row + KVR, row + KVR + ROPE, cache.rope_key.data() + (len0 + t) * ROPE);
  }

  const float scale = 1.0f / std::sqrt(float(QD));
  for (size_t t = 0; t < T; ++t) {
    const size_t npos = len0 + t + 1;
    pool->parallel_for(NH, 1, [&](size_t h0, size_t h1) {
      thread_local std::vector<float> qlat, scores, olat, wrow;  // reused per thread
      qlat.resize(KVR);
      wrow.resize(KVR);
      scores.resize(npos);
      olat.resize(KVR);
      for (size_t h = h0; h < h1; ++h) {
        const float* qh = q + (t * NH + h) * QD;
        // Head h's key rows are kv_b_proj rows h*KVB .. +NOPE, its value rows the next V.
        // qlat[c] = sum_d qn[d] * Wk[d][c], d in order (each row widened exactly first).
        std::fill(qlat.begin(), qlat.end(), 0.0f);
        for (size_t d = 0; d < NOPE; ++d) {
          const float qd = qh[d];
          w.kv_b_proj.row_f32(h * KVB + d, wrow.data());
          for (size_t c = 0; c < KVR; ++c) qlat[c] = qlat[c] + qd * wrow[c];
        }
        float mx = -INFINITY;
        for (size_t p = 0; p < npos; ++p) {
          const float sc = (kernels::dot_f32(qlat.data(), cache.latent.data() + p * KVR, KVR) +
                            kernels::dot_f32(qh + NOPE, cache.rope_key.data() + p * ROPE, ROPE)) *
                           scale;
          scores[p] = sc;
          mx = std::max(mx, sc);
        }
        float sum = 0.0f;
        for (size_t p = 0; p < npos; ++p) {
          scores[p] = std::exp(scores[p] - mx);
          sum = sum + scores[p];
        }
        std::fill(olat.begin(), olat.end(), 0.0f);
        for (size_t p = 0; p < npos; ++p) {
          const float a = scores[p] / sum;
          const float* lat = cache.latent.data() + p * KVR;
          for (size_t c = 0; c < KVR; ++c) olat[c] = olat[c] + a * lat[c];
        }
        float* oh = o + (t * NH + h) * V;
        ops::matmul_rows(w.kv_b_proj, h * KVB + NOPE, V, olat.data(), 1, oh, nullptr);
        for (size_t j = 0; j < V; ++j) oh[j] = oh[j] * ops::sigmoid(gate[(t * NH + h) * V + j]);
      }
    });
  }
  ops::matmul(w.o_proj, o, T, out, pool);
}

}  // namespace deltafin::layers
