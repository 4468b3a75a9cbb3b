// Gated NoPE MLA with the latent cache and absorbed attention
// (docs/design/engine.md): the cache keeps the normalised kv latent and the shared
// rope key per position. The query's nope part is absorbed through kv_b's
// key rows, scores are taken against latents, and the value rows of kv_b
// are applied to the attention-weighted latent.
//
// The cache is walked a chunk of positions at a time with every head and
// row of the block inside (scores as one matrix product per chunk, then the
// weighted sum position by position), so it is read once per block per
// thread, not once per head. Per (row, head) every sum still runs over the
// positions in order, with the same operations as a loop over positions.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec.h"
#include "model/layers.h"
#include "model/matrix_ops.h"

namespace deltafin::layers {

namespace {

// Scores of rows [t0, t1) are kept for every head and position at once;
// the block's rows are taken in groups that keep that within this budget
// (one row at a time at the least).
constexpr size_t kScoreBudgetFloats = size_t(16) << 20;  // 64 MiB

}  // namespace

void mla(const ModelConfig& cfg, const LayerWeights& w, MlaLayerCache& cache, const float* x, size_t T, float* out,
         Workspace& ws, ThreadPool* pool) {
  const auto& m = cfg.mla;
  const size_t NH = m.heads, QR = m.q_lora_rank, KVR = m.kv_lora_rank, NOPE = m.qk_nope_dim,
               ROPE = m.qk_rope_dim, V = m.v_head_dim, QD = m.qk_head_dim(), KVB = NOPE + V;
  const size_t P = size_t(pool->size());
  float* cq = ws.mla_cq.take(T * QR);
  float* q = ws.mla_q.take(T * NH * QD);
  float* ckv = ws.mla_kv.take(T * (KVR + ROPE));
  float* gate = ws.mla_gate.take(T * NH * V);
  ops::matmul_group({{&w.q_a_proj, cq}, {&w.kv_a_proj, ckv}, {&w.g_proj, gate}}, x, T, pool);
  for (size_t t = 0; t < T; ++t) ops::rms_norm(cq + t * QR, w.q_a_norm.data(), QR, cfg.rms_eps, cq + t * QR);
  ops::matmul(w.q_b_proj, cq, T, q, pool);

  // Append every row's latent and rope key first: row t then sees exactly the
  // positions <= its own, as it would in a T = 1 step.
  const size_t len0 = cache.length();
  cache.reserve(len0 + T);
  for (size_t t = 0; t < T; ++t) {
    const float* row = ckv + t * (KVR + ROPE);
    ops::rms_norm(row, w.kv_a_norm.data(), KVR, cfg.rms_eps, cache.latent(len0 + t));
    std::copy(row + KVR, row + KVR + ROPE, cache.rope(len0 + t));
  }
  cache.set_length(len0 + T);

  // Absorbed queries: qlat[t][h][c] = Σ_d q_nope[t][h][d] · Wk_h[d][c], d in
  // order, each kv_b key row widened once for all rows. Heads split over threads.
  float* qlat = ws.mla_q_latent.take(T * NH * KVR);
  float* qrope = ws.mla_q_rope.take(T * NH * ROPE);
  pool->parallel_for(NH, 1, [&](size_t h0, size_t h1) {
    for (size_t h = h0; h < h1; ++h) {
      for (size_t t = 0; t < T; ++t) {
        std::fill(qlat + (t * NH + h) * KVR, qlat + (t * NH + h + 1) * KVR, 0.0f);
        const float* qh = q + (t * NH + h) * QD;
        std::copy(qh + NOPE, qh + QD, qrope + (t * NH + h) * ROPE);
      }
    }
  });
  pool->parallel_for(P, 1, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      float* wrow = ws.threads[i].kv_row.take(KVR);
      const auto [h0, h1] = share(NH, i, P);
      for (size_t h = h0; h < h1; ++h)
        for (size_t d = 0; d < NOPE; ++d) {
          w.kv_b_proj.row_f32(h * KVB + d, wrow);
          for (size_t t = 0; t < T; ++t) kernels::axpy(q[(t * NH + h) * QD + d], wrow, qlat + (t * NH + h) * KVR, KVR);
        }
    }
  });

  const float scale = 1.0f / std::sqrt(float(QD));
  float* attended = ws.mla_attended.take(NH * T * KVR);  // [h][t][c]
  const size_t max_pos = len0 + T;
  const size_t group = std::clamp<size_t>(kScoreBudgetFloats / std::max<size_t>(1, NH * max_pos), 1, T);
  for (size_t t0 = 0; t0 < T; t0 += group) {
    const size_t t1 = std::min(T, t0 + group), G = t1 - t0, Q = G * NH;  // queries: (t, h) pairs
    const size_t npos_end = len0 + t1;                                  // positions any row here sees
    float* scores = ws.mla_scores.take(Q * npos_end);
    float* sums = ws.mla_sums.take(Q);
    const size_t chunks = (npos_end + MlaLayerCache::kChunk - 1) / MlaLayerCache::kChunk;
    // Scores, a chunk of positions per task: s = (q_lat · latent + q_rope · rope) * scale.
    std::atomic<size_t> next{0};
    pool->parallel_for(P, 1, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) {
        float* ylat = ws.threads[i].scores_latent.take(Q * MlaLayerCache::kChunk);
        float* yrope = ws.threads[i].scores_rope.take(Q * MlaLayerCache::kChunk);
        for (size_t c = next++; c < chunks; c = next++) {
          const size_t p0 = c * MlaLayerCache::kChunk, n = std::min(MlaLayerCache::kChunk, npos_end - p0);
          kernels::matmul_f32(cache.latent(p0), n, KVR, qlat + t0 * NH * KVR, Q, ylat, nullptr);
          kernels::matmul_f32(cache.rope(p0), n, ROPE, qrope + t0 * NH * ROPE, Q, yrope, nullptr);
          for (size_t qi = 0; qi < Q; ++qi)
            for (size_t j = 0; j < n; ++j)
              scores[qi * npos_end + p0 + j] = (ylat[qi * n + j] + yrope[qi * n + j]) * scale;
        }
      }
    });
    // Softmax numerators per query over the positions it sees.
    pool->parallel_for(Q, 1, [&](size_t q0, size_t q1) {
      for (size_t qi = q0; qi < q1; ++qi) {
        const size_t npos = len0 + t0 + qi / NH + 1;
        sums[qi] = ops::softmax_exp(scores + qi * npos_end, npos);
      }
    });
    // Weighted latents: positions outer, this thread's queries inner.
    pool->parallel_for(P, 1, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) {
        const auto [qa, qb] = share(Q, i, P);
        for (size_t qi = qa; qi < qb; ++qi) {
          const size_t t = t0 + qi / NH, h = qi % NH;
          std::fill(attended + (h * T + t) * KVR, attended + (h * T + t + 1) * KVR, 0.0f);
        }
        for (size_t p = 0; p < npos_end; ++p) {
          const float* lat = cache.latent(p);
          for (size_t qi = qa; qi < qb; ++qi) {
            const size_t t = t0 + qi / NH, h = qi % NH;
            if (p > len0 + t) continue;  // causal: row t sees positions <= len0 + t
            kernels::axpy(scores[qi * npos_end + p] / sums[qi], lat, attended + (h * T + t) * KVR, KVR);
          }
        }
      }
    });
  }

  // Values: head h's value rows of kv_b on its attended latents, then the gate.
  float* o = ws.mla_out.take(T * NH * V);
  pool->parallel_for(P, 1, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      float* vals = ws.threads[i].value_out.take(T * V);
      const auto [h0, h1] = share(NH, i, P);
      for (size_t h = h0; h < h1; ++h) {
        ops::matmul_rows(w.kv_b_proj, h * KVB + NOPE, V, attended + h * T * KVR, T, vals, nullptr);
        for (size_t t = 0; t < T; ++t) {
          float* oh = o + (t * NH + h) * V;
          for (size_t j = 0; j < V; ++j) oh[j] = vals[t * V + j] * ops::sigmoid(gate[(t * NH + h) * V + j]);
        }
      }
    }
  });
  ops::matmul(w.o_proj, o, T, out, pool);
}

}  // namespace deltafin::layers
