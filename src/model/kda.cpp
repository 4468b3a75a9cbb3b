// Kimi Delta Attention (docs/design/engine.md; A_log per head). The projections run
// batched over the T rows; the short conv runs per channel over the rows in
// order; the delta-rule recurrence runs per head over the rows in order. So
// a row's result is the same in any block, and one dispatch covers a block.
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/vec.h"
#include "model/layers.h"
#include "model/matrix_ops.h"

namespace deltafin::layers {

namespace {

// SiLU of the causal conv for channels [c0, c1) over T rows. Row t's window
// is the last K values of (the session's window ++ the block's inputs up to
// t), as if the window had been shifted once per row; weights [C][K].
void conv_rows(const float* window, const float* weights, const float* in, size_t T, size_t C, size_t K, size_t c0,
               size_t c1, float* out) {
  for (size_t n = c0; n < c1; ++n) {
    const float* wnd = window + n * K;
    const float* wt = weights + n * K;
    for (size_t t = 0; t < T; ++t) {
      // Element j of row t's window: seq[t + 1 + j], seq = window ++ inputs.
      float acc = 0.0f;
      for (size_t j = 0; j < K; ++j) {
        const size_t s = t + 1 + j;
        const float xv = s < K ? wnd[s] : in[(s - K) * C + n];
        acc = acc + wt[j] * xv;
      }
      out[t * C + n] = ops::silu(acc);
    }
  }
}

// The window after the block's first n rows: the last K of (window ++ rows).
void advance_window(float* window, const float* in, size_t n_rows, size_t C, size_t K, size_t c0, size_t c1) {
  for (size_t n = c0; n < c1; ++n) {
    float* wnd = window + n * K;
    for (size_t j = 0; j < K; ++j) {
      const size_t s = n_rows + j;  // seq index of the new window's element j
      wnd[j] = s < K ? wnd[s] : in[(s - K) * C + n];
    }
  }
}

struct KdaBlock {
  const float *q, *k, *v;  // conv outputs [T][C] (q and k are normalised in place per head)
  const float* decay_in;   // [T][C]
  const float* beta;       // [T][heads]
  const float* gate;       // [T][C] or null (commit replay: no output)
  float* y;                // [T][C] or null
};

// Heads [h0, h1) over the block's rows in order: normalise q and k, decay,
// predict, delta write, read; then the per-head norm and output gate.
void heads_rows(const ModelConfig& cfg, const LayerWeights& w, float* S_all, const KdaBlock& b, size_t T, size_t h0,
                size_t h1, ThreadScratch& ts, bool on_copy) {
  const size_t C = cfg.kda.channels(), D = cfg.kda.head_dim, NH = cfg.kda.heads;
  const float qscale = 1.0f / std::sqrt(float(D));
  const float lb = cfg.kda.gate_lower_bound;
  float* decay = ts.decay.take(D);
  float* u = ts.u.take(D);
  float* yscratch = b.y ? nullptr : ts.key.take(D);
  for (size_t h = h0; h < h1; ++h) {
    float* S = S_all + h * D * D;
    if (on_copy) {  // a verification block runs on a copy; the session keeps its state
      float* copy = ts.state.take(D * D);
      std::memcpy(copy, S, D * D * sizeof(float));
      S = copy;
    }
    const float a_scale = std::exp(w.a_log[h]);
    for (size_t t = 0; t < T; ++t) {
      float* qh = const_cast<float*>(b.q) + t * C + h * D;
      float* kh = const_cast<float*>(b.k) + t * C + h * D;
      const float* vh = b.v + t * C + h * D;
      ops::l2_normalize(qh, D, qscale);
      ops::l2_normalize(kh, D, 1.0f);
      const float* at = b.decay_in + t * C + h * D;
      for (size_t i = 0; i < D; ++i) decay[i] = std::exp(lb * ops::sigmoid(a_scale * (at[i] + w.dt_bias[h * D + i])));
      const float beta = ops::sigmoid(b.beta[t * NH + h]);
      float* yh = b.y ? b.y + t * C + h * D : yscratch;
      kernels::kda_step(S, D, decay, kh, vh, qh, beta, u, yh);
      if (!b.y) continue;
      ops::rms_norm(yh, w.o_norm.data(), D, cfg.rms_eps, yh);
      const float* gt = b.gate + t * C + h * D;
      for (size_t j = 0; j < D; ++j) yh[j] = yh[j] * ops::sigmoid(gt[j]);
    }
  }
}

// The conv outputs of T rows (all three windows), split over the pool by channel.
void conv_block(const ModelConfig& cfg, const LayerWeights& w, const KdaLayerState& st, const float* q,
                const float* k, const float* v, size_t T, float* cq, float* ck, float* cv, ThreadPool* pool) {
  const size_t C = cfg.kda.channels(), K = cfg.kda.conv_kernel;
  pool->parallel_for(C, 16, [&](size_t c0, size_t c1) {
    conv_rows(st.conv_q.data(), w.q_conv.data(), q, T, C, K, c0, c1, cq);
    conv_rows(st.conv_k.data(), w.k_conv.data(), k, T, C, K, c0, c1, ck);
    conv_rows(st.conv_v.data(), w.v_conv.data(), v, T, C, K, c0, c1, cv);
  });
}

void advance_windows(const ModelConfig& cfg, KdaLayerState& st, const float* q, const float* k, const float* v,
                     size_t n, ThreadPool* pool) {
  const size_t C = cfg.kda.channels(), K = cfg.kda.conv_kernel;
  pool->parallel_for(C, 64, [&](size_t c0, size_t c1) {
    advance_window(st.conv_q.data(), q, n, C, K, c0, c1);
    advance_window(st.conv_k.data(), k, n, C, K, c0, c1);
    advance_window(st.conv_v.data(), v, n, C, K, c0, c1);
  });
}

void run_heads(const ModelConfig& cfg, const LayerWeights& w, float* S, const KdaBlock& b, size_t T, Workspace& ws,
               ThreadPool* pool, bool on_copy) {
  const size_t NH = cfg.kda.heads;
  pool->parallel_for(size_t(pool->size()), 1, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      const auto [h0, h1] = share(NH, i, size_t(pool->size()));
      heads_rows(cfg, w, S, b, T, h0, h1, ws.threads[i], on_copy);
    }
  });
}

}  // namespace

void kda(const ModelConfig& cfg, const LayerWeights& w, KdaLayerState& st, const float* x, size_t T, float* out,
         Workspace& ws, ThreadPool* pool, KdaRecord* record) {
  const size_t C = cfg.kda.channels(), D = cfg.kda.head_dim, NH = cfg.kda.heads;
  float* q = ws.kda_q.take(T * C);
  float* k = ws.kda_k.take(T * C);
  float* v = ws.kda_v.take(T * C);
  float* g = ws.kda_gate.take(T * C);
  float* fa = ws.kda_decay_low.take(T * D);
  float* fb = ws.kda_decay_in.take(T * C);
  float* beta = ws.kda_beta.take(T * NH);
  float* cq = ws.kda_cq.take(T * C);
  float* ck = ws.kda_ck.take(T * C);
  float* cv = ws.kda_cv.take(T * C);
  float* y = ws.kda_y.take(T * C);
  ops::matmul_group({{&w.q_proj, q}, {&w.k_proj, k}, {&w.v_proj, v}, {&w.g_proj, g}, {&w.f_a_proj, fa},
                     {&w.b_proj, beta}},
                    x, T, pool);
  ops::matmul(w.f_b_proj, fa, T, fb, pool);

  conv_block(cfg, w, st, q, k, v, T, cq, ck, cv, pool);
  if (record) {
    record->rows = T;
    record->q.assign(q, q + T * C);
    record->k.assign(k, k + T * C);
    record->v.assign(v, v + T * C);
    record->decay_in.assign(fb, fb + T * C);
    record->beta.assign(beta, beta + T * NH);
  } else {
    advance_windows(cfg, st, q, k, v, T, pool);
  }
  run_heads(cfg, w, st.S.data(), KdaBlock{cq, ck, cv, fb, beta, g, y}, T, ws, pool, record != nullptr);
  ops::matmul(w.o_proj, y, T, out, pool);
}

void kda_commit(const ModelConfig& cfg, const LayerWeights& w, KdaLayerState& st, const KdaRecord& rec, size_t n,
                Workspace& ws, ThreadPool* pool) {
  if (n == 0) return;
  const size_t C = cfg.kda.channels();
  float* cq = ws.kda_cq.take(n * C);
  float* ck = ws.kda_ck.take(n * C);
  float* cv = ws.kda_cv.take(n * C);
  conv_block(cfg, w, st, rec.q.data(), rec.k.data(), rec.v.data(), n, cq, ck, cv, pool);
  advance_windows(cfg, st, rec.q.data(), rec.k.data(), rec.v.data(), n, pool);
  run_heads(cfg, w, st.S.data(), KdaBlock{cq, ck, cv, rec.decay_in.data(), rec.beta.data(), nullptr, nullptr}, n,
            ws, pool, false);
}

}  // namespace deltafin::layers
