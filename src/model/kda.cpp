// Kimi Delta Attention (spec §2.4; A_log per head, ARCHITECTURE §7).
// Projections run batched over the T rows; the recurrence runs token by token
// in fixed order, so a row's result is the same in any block.
#include <cmath>

#include "model/layer_ops.h"
#include "model/layers.h"

namespace deltafin::layers {

namespace {

// Shift the window of each channel left by one and put the new value last;
// return SiLU(conv). window: [C][K], weights: [C][K].
void conv_step(float* window, const float* weights, const float* in, size_t C, size_t K, float* out) {
  for (size_t n = 0; n < C; ++n) {
    float* wnd = window + n * K;
    for (size_t j = 0; j + 1 < K; ++j) wnd[j] = wnd[j + 1];
    wnd[K - 1] = in[n];
    float acc = 0.0f;
    for (size_t j = 0; j < K; ++j) acc = acc + weights[n * K + j] * wnd[j];
    out[n] = ops::silu(acc);
  }
}

// x * rsqrt(sum x² + 1e-6) * scale, in place.
void l2_normalize(float* x, size_t n, float scale) {
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) ss = ss + x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + 1e-6f);
  for (size_t i = 0; i < n; ++i) x[i] = (x[i] * inv) * scale;
}

}  // namespace

void kda(const ModelConfig& cfg, const LayerWeights& w, KdaLayerState& st, const float* x, size_t T, float* out,
         Scratch& s, ThreadPool* pool) {
  const size_t H = cfg.hidden, C = cfg.kda.channels(), D = cfg.kda.head_dim, NH = cfg.kda.heads,
               K = cfg.kda.conv_kernel;
  float* q = Scratch::take(s.a, T * C);
  float* k = Scratch::take(s.b, T * C);
  float* v = Scratch::take(s.c, T * C);
  float* g = Scratch::take(s.d, T * C);
  float* fa = Scratch::take(s.e, T * D);
  float* fb = Scratch::take(s.f, T * C);
  float* beta = Scratch::take(s.g, T * NH);
  float* y = Scratch::take(s.h, T * C);
  ops::matmul(w.q_proj, x, T, q, pool);
  ops::matmul(w.k_proj, x, T, k, pool);
  ops::matmul(w.v_proj, x, T, v, pool);
  ops::matmul(w.g_proj, x, T, g, pool);
  ops::matmul(w.f_a_proj, x, T, fa, pool);
  ops::matmul(w.f_b_proj, fa, T, fb, pool);
  ops::matmul(w.b_proj, x, T, beta, pool);

  const float qscale = 1.0f / std::sqrt(float(D));
  const float lb = cfg.kda.gate_lower_bound;
  float* conv_out = Scratch::take(s.head, 3 * C);
  for (size_t t = 0; t < T; ++t) {
    float* qt = q + t * C;
    float* kt = k + t * C;
    float* vt = v + t * C;
    conv_step(st.conv_q.data(), w.q_conv.data(), qt, C, K, conv_out);
    conv_step(st.conv_k.data(), w.k_conv.data(), kt, C, K, conv_out + C);
    conv_step(st.conv_v.data(), w.v_conv.data(), vt, C, K, conv_out + 2 * C);
    std::copy(conv_out, conv_out + C, qt);
    std::copy(conv_out + C, conv_out + 2 * C, kt);
    std::copy(conv_out + 2 * C, conv_out + 3 * C, vt);
    const float* at = fb + t * C;
    float* yt = y + t * C;
    const float* gt = g + t * C;
    pool->parallel_for(NH, 1, [&](size_t h0, size_t h1) {
      // Per-thread scratch, reused across calls (no allocation in steady state).
      thread_local std::vector<float> u, decay;
      u.resize(D);
      decay.resize(D);
      for (size_t h = h0; h < h1; ++h) {
        float* qh = qt + h * D;
        float* kh = kt + h * D;
        const float* vh = vt + h * D;
        l2_normalize(qh, D, qscale);
        l2_normalize(kh, D, 1.0f);
        const float a_scale = std::exp(w.a_log[h]);
        for (size_t i = 0; i < D; ++i)
          decay[i] = std::exp(lb * ops::sigmoid(a_scale * (at[h * D + i] + w.dt_bias[h * D + i])));
        const float b = ops::sigmoid(beta[t * NH + h]);
        float* S = st.S.data() + h * D * D;
        // Decay, then predict u = Sᵀk with the decayed state (sum over i in order).
        std::fill(u.begin(), u.end(), 0.0f);
        for (size_t i = 0; i < D; ++i) {
          float* row = S + i * D;
          const float di = decay[i], ki = kh[i];
          for (size_t j = 0; j < D; ++j) {
            row[j] = row[j] * di;
            u[j] = u[j] + ki * row[j];
          }
        }
        for (size_t j = 0; j < D; ++j) u[j] = vh[j] - u[j];
        // Delta-rule write, then read y = Sᵀq with the new state.
        float* yh = yt + h * D;
        std::fill(yh, yh + D, 0.0f);
        for (size_t i = 0; i < D; ++i) {
          float* row = S + i * D;
          const float bk = b * kh[i], qi = qh[i];
          for (size_t j = 0; j < D; ++j) {
            row[j] = row[j] + bk * u[j];
            yh[j] = yh[j] + qi * row[j];
          }
        }
        ops::rms_norm(yh, w.o_norm.data(), D, cfg.rms_eps, yh);
        for (size_t j = 0; j < D; ++j) yh[j] = yh[j] * ops::sigmoid(gt[h * D + j]);
      }
    });
  }
  ops::matmul(w.o_proj, y, T, out, pool);
  (void)H;
}

}  // namespace deltafin::layers
