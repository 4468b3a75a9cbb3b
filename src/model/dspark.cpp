#include "model/dspark.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "kernels/matmul.h"
#include "model/matrix_ops.h"
#include "model/rope.h"

namespace deltafin {

namespace {

// Tensors by their published names, shapes checked.
struct Bind {
  const Checkpoint& ck;
  Result<Matrix> matrix(const std::string& name, int rows, int cols) {
    DF_ASSIGN(const TensorInfo* t, ck.require(name, DType::BF16, {rows, cols}));
    Matrix m;
    m.dtype = DType::BF16, m.rows = rows, m.cols = cols, m.data = t->data, m.name = &t->name;
    return m;
  }
  Result<std::vector<float>> vec(const std::string& name, int n) {
    DF_ASSIGN(const TensorInfo* t, ck.require(name, DType::BF16, {n}));
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, t->data + 2 * i, 2);
      v[i] = bf16_to_f32(b);
    }
    return v;
  }
};

// DSpark's rotated pairs: the shared RoPE frequencies (model/rope.h), in fp32.
std::vector<float> yarn_inv_freq(const DsparkConfig& c) {
  const YarnParams yarn{c.yarn_factor, double(c.original_max_positions), c.beta_fast, c.beta_slow, true};
  const std::vector<double> inv = rope_inv_freq(c.rope_theta, c.qk_rope_dim, &yarn);
  return std::vector<float>(inv.begin(), inv.end());
}

// RMSNorm as a BF16 module computes it: fp32 statistics, the normalised row
// rounded to BF16, times the BF16 weight, rounded again. out may alias x.
void rms_norm_bf16(const float* x, const float* w, size_t n, float eps, float* out) {
  float ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = round_bf16(w[i] * round_bf16(x[i] * r));
}

// Ties to the lowest id, as the target's greedy argmax.
int32_t argmax_lowest_id(const float* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return int32_t(best);
}

void round_all(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
}

// Y = round(M · X) for T rows.
void linear(const Matrix& m, const float* X, size_t T, float* Y, ThreadPool* pool) {
  ops::matmul(m, X, T, Y, pool);
  round_all(Y, T * size_t(m.rows));
}

}  // namespace

void DsparkCache::clear(size_t layers) {
  length = 0;
  latent.assign(layers, {});
  rope.assign(layers, {});
}

uint64_t DsparkCache::bytes() const {
  uint64_t b = 0;
  for (const auto& v : latent) b += 4 * v.size();
  for (const auto& v : rope) b += 4 * v.size();
  return b;
}

Result<std::unique_ptr<Dspark>> Dspark::open(const std::string& dir, const Model& target, int threads) {
  auto d = std::unique_ptr<Dspark>(new Dspark());
  DF_ASSIGN(d->ck_, Checkpoint::open(dir));
  DF_ASSIGN(d->cfg_, DsparkConfig::from_json(d->ck_->config()));
  const DsparkConfig& c = d->cfg_;
  DF_TRY(c.check_target(target.config()));
  const int H = c.hidden, NH = c.heads, R = c.kv_lora_rank, P = c.qk_rope_dim, QD = c.qk_head_dim();
  Bind b{*d->ck_};
  DsparkWeights& w = d->w_;
  DF_ASSIGN(w.context_proj, b.matrix("context_proj.weight", H, int(c.target_layers.size()) * H));
  DF_ASSIGN(w.context_norm, b.vec("context_norm.weight", H));
  DF_ASSIGN(w.final_norm, b.vec("final_norm.weight", H));
  for (int j = 0; j < c.num_layers; ++j) {
    const std::string p = fmt::format("layers.{}.", j), a = p + "self_attn.";
    DsparkLayerWeights L;
    DF_ASSIGN(L.input_norm, b.vec(p + "input_layernorm.weight", H));
    DF_ASSIGN(L.post_norm, b.vec(p + "post_attention_layernorm.weight", H));
    DF_ASSIGN(L.q_a, b.matrix(a + "q_a_proj.weight", c.q_lora_rank, H));
    DF_ASSIGN(L.q_a_norm, b.vec(a + "q_a_layernorm.weight", c.q_lora_rank));
    DF_ASSIGN(L.q_b, b.matrix(a + "q_b_proj.weight", NH * QD, c.q_lora_rank));
    DF_ASSIGN(L.kv_a, b.matrix(a + "kv_a_proj_with_mqa.weight", R + P, H));
    DF_ASSIGN(L.kv_a_norm, b.vec(a + "kv_a_layernorm.weight", R));
    DF_ASSIGN(L.kv_b, b.matrix(a + "kv_b_proj.weight", NH * (c.qk_nope_dim + c.v_head_dim), R));
    DF_ASSIGN(L.o, b.matrix(a + "o_proj.weight", H, NH * c.v_head_dim));
    DF_ASSIGN(L.gate, b.matrix(p + "mlp.gate_proj.weight", c.intermediate, H));
    DF_ASSIGN(L.up, b.matrix(p + "mlp.up_proj.weight", c.intermediate, H));
    DF_ASSIGN(L.down, b.matrix(p + "mlp.down_proj.weight", H, c.intermediate));
    w.layers.push_back(std::move(L));
  }
  DF_ASSIGN(w.markov_w1, b.matrix("markov_head.markov_w1.weight", c.vocab, c.markov_rank));
  DF_ASSIGN(w.markov_w2, b.matrix("markov_head.markov_w2.weight", c.vocab, c.markov_rank));
  if (c.confidence_head) {
    DF_ASSIGN(w.confidence, b.matrix("confidence_head.proj.weight", 1, H + (c.confidence_with_markov ? c.markov_rank : 0)));
    DF_ASSIGN(auto bias, b.vec("confidence_head.proj.bias", 1));
    w.confidence_bias = bias[0];
  }
  // embed_tokens.weight may be present: the target's own embedding is used.
  const ModelWeights& tw = target.weights();
  d->embed_ = &tw.embed;
  d->lm_head_ = &tw.lm_head;
  d->pool_ = std::make_unique<ThreadPool>(threads);
  d->inv_freq_ = yarn_inv_freq(c);
  const double m_all = c.mscale_all_dim > 0 ? yarn_mscale(c.yarn_factor, c.mscale_all_dim) : 1.0;
  d->scale_ = float(1.0 / std::sqrt(double(QD)) * m_all * m_all);
  d->rope_mscale_ = float(yarn_mscale(c.yarn_factor, c.mscale) /
                          (c.mscale_all_dim > 0 ? yarn_mscale(c.yarn_factor, c.mscale_all_dim) : 1.0));
  return d;
}

// Interleaved pairs (2i, 2i+1) rotate by pos * inv_freq[i]; fp32, one rounding.
void Dspark::rotate(float* x, int64_t pos) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float ang = float(pos) * inv_freq_[i];
    const float c = std::cos(ang) * rope_mscale_, s = std::sin(ang) * rope_mscale_;
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = round_bf16(a * c - b * s);
    x[2 * i + 1] = round_bf16(a * s + b * c);
  }
}

void Dspark::ingest(std::span<const float> hidden, size_t n, DsparkCache& cache) {
  if (n == 0) return;
  const DsparkConfig& c = cfg_;
  const size_t H = size_t(c.hidden), NL = c.target_layers.size(), R = size_t(c.kv_lora_rank),
               P = size_t(c.qk_rope_dim);
  if (cache.latent.size() != size_t(c.num_layers)) cache.clear(size_t(c.num_layers));
  std::vector<float> hcat(hidden.begin(), hidden.begin() + ptrdiff_t(n * NL * H));
  round_all(hcat.data(), hcat.size());
  std::vector<float> ctx(n * H), z(n * (R + P));
  linear(w_.context_proj, hcat.data(), n, ctx.data(), pool_.get());
  for (size_t t = 0; t < n; ++t) rms_norm_bf16(&ctx[t * H], w_.context_norm.data(), H, c.rms_eps, &ctx[t * H]);
  for (int j = 0; j < c.num_layers; ++j) {
    const DsparkLayerWeights& L = w_.layers[size_t(j)];
    linear(L.kv_a, ctx.data(), n, z.data(), pool_.get());
    auto& lat = cache.latent[size_t(j)];
    auto& rope = cache.rope[size_t(j)];
    lat.resize((cache.length + n) * R);
    rope.resize((cache.length + n) * P);
    for (size_t t = 0; t < n; ++t) {
      const float* zt = &z[t * (R + P)];
      rms_norm_bf16(zt, L.kv_a_norm.data(), R, c.rms_eps, &lat[(cache.length + t) * R]);
      float* kr = &rope[(cache.length + t) * P];
      std::copy(zt + R, zt + R + P, kr);
      rotate(kr, int64_t(cache.length + t));
    }
  }
  cache.length += n;
}

// MLA over [the cache + the block's own rows], no causal mask, absorbed form.
void Dspark::attention(int layer, const float* n, size_t B, int64_t pos0, const DsparkCache& cache, float* out) {
  const DsparkConfig& c = cfg_;
  const DsparkLayerWeights& L = w_.layers[size_t(layer)];
  const size_t NH = size_t(c.heads), QR = size_t(c.q_lora_rank), R = size_t(c.kv_lora_rank),
               P = size_t(c.qk_rope_dim), NOPE = size_t(c.qk_nope_dim), V = size_t(c.v_head_dim),
               QD = NOPE + P, KVB = NOPE + V;
  std::vector<float> cq(B * QR), q(B * NH * QD), z(B * (R + P)), lat(B * R), kr(B * P);
  linear(L.q_a, n, B, cq.data(), pool_.get());
  for (size_t r = 0; r < B; ++r) rms_norm_bf16(&cq[r * QR], L.q_a_norm.data(), QR, c.rms_eps, &cq[r * QR]);
  linear(L.q_b, cq.data(), B, q.data(), pool_.get());
  linear(L.kv_a, n, B, z.data(), pool_.get());
  for (size_t r = 0; r < B; ++r) {
    rms_norm_bf16(&z[r * (R + P)], L.kv_a_norm.data(), R, c.rms_eps, &lat[r * R]);
    std::copy(&z[r * (R + P) + R], &z[r * (R + P) + R + P], &kr[r * P]);
    rotate(&kr[r * P], pos0 + int64_t(r));
    for (size_t h = 0; h < NH; ++h) rotate(&q[(r * NH + h) * QD + NOPE], pos0 + int64_t(r));
  }
  const size_t ctx_len = cache.length, S = ctx_len + B;
  const float* clat = ctx_len ? cache.latent[size_t(layer)].data() : nullptr;
  const float* crope = ctx_len ? cache.rope[size_t(layer)].data() : nullptr;
  std::vector<float> o(B * NH * V);
  pool_->parallel_for(NH, 1, [&](size_t h0, size_t h1) {
    std::vector<float> wrow(R), qlat(R), scores(S), att(R), vrow(R);
    for (size_t h = h0; h < h1; ++h)
      for (size_t r = 0; r < B; ++r) {
        const float* qh = &q[(r * NH + h) * QD];
        // Absorbed query: Σ_d q_nope[d] · Wk_h[d], d in order.
        std::fill(qlat.begin(), qlat.end(), 0.0f);
        for (size_t d = 0; d < NOPE; ++d) {
          L.kv_b.row_f32(h * KVB + d, wrow.data());
          for (size_t x = 0; x < R; ++x) qlat[x] += qh[d] * wrow[x];
        }
        round_all(qlat.data(), R);
        float mx = -INFINITY;
        for (size_t s = 0; s < S; ++s) {
          const float* ls = s < ctx_len ? clat + s * R : &lat[(s - ctx_len) * R];
          const float* ks = s < ctx_len ? crope + s * P : &kr[(s - ctx_len) * P];
          scores[s] = (kernels::dot_f32(qlat.data(), ls, R) + kernels::dot_f32(qh + NOPE, ks, P)) * scale_;
          mx = std::max(mx, scores[s]);
        }
        float sum = 0;
        for (size_t s = 0; s < S; ++s) sum += (scores[s] = std::exp(scores[s] - mx));
        std::fill(att.begin(), att.end(), 0.0f);
        for (size_t s = 0; s < S; ++s) {
          const float p = round_bf16(scores[s] / sum);
          const float* ls = s < ctx_len ? clat + s * R : &lat[(s - ctx_len) * R];
          for (size_t x = 0; x < R; ++x) att[x] += p * ls[x];
        }
        round_all(att.data(), R);
        float* oh = &o[(r * NH + h) * V];
        for (size_t v = 0; v < V; ++v) {
          L.kv_b.row_f32(h * KVB + NOPE + v, vrow.data());
          oh[v] = round_bf16(kernels::dot_f32(vrow.data(), att.data(), R));
        }
      }
  });
  linear(L.o, o.data(), B, out, pool_.get());
}

void Dspark::propose(int32_t anchor, int k, const DsparkCache& cache, DsparkProposal& out) {
  const DsparkConfig& c = cfg_;
  const size_t B = size_t(c.block_size), H = size_t(c.hidden), I = size_t(c.intermediate),
               V = size_t(c.vocab), MR = size_t(c.markov_rank);
  k = std::clamp(k, 0, c.block_size);
  out.ids.clear();
  out.confidence.clear();
  std::vector<float> h(B * H), acc(B * H), res(B * H), nrm(B * H), a(B * H), g(B * I), u(B * I);
  for (size_t r = 0; r < B; ++r) embed_->row_f32(size_t(r == 0 ? anchor : c.mask_token_id), &h[r * H]);
  const int64_t pos0 = int64_t(cache.length);
  for (int j = 0; j < c.num_layers; ++j) {
    const DsparkLayerWeights& L = w_.layers[size_t(j)];
    for (size_t i = 0; i < B * H; ++i) acc[i] = j == 0 ? h[i] : round_bf16(res[i] + h[i]);
    for (size_t r = 0; r < B; ++r) rms_norm_bf16(&acc[r * H], L.input_norm.data(), H, c.rms_eps, &nrm[r * H]);
    attention(j, nrm.data(), B, pos0, cache, a.data());
    for (size_t i = 0; i < B * H; ++i) acc[i] = round_bf16(acc[i] + a[i]);
    for (size_t r = 0; r < B; ++r) rms_norm_bf16(&acc[r * H], L.post_norm.data(), H, c.rms_eps, &nrm[r * H]);
    linear(L.gate, nrm.data(), B, g.data(), pool_.get());
    linear(L.up, nrm.data(), B, u.data(), pool_.get());
    for (size_t i = 0; i < B * I; ++i) {
      const float x = g[i];
      g[i] = round_bf16(round_bf16(x / (1.0f + std::exp(-x))) * u[i]);
    }
    linear(L.down, g.data(), B, h.data(), pool_.get());
    res = acc;
  }
  out.hidden.resize(B * H);
  for (size_t i = 0; i < B * H; ++i) acc[i] = round_bf16(res[i] + h[i]);
  for (size_t r = 0; r < B; ++r) rms_norm_bf16(&acc[r * H], w_.final_norm.data(), H, c.rms_eps, &out.hidden[r * H]);
  if (k == 0) return;
  out.logits.resize(size_t(k) * V);
  ops::matmul(*lm_head_, out.hidden.data(), size_t(k), out.logits.data(), pool_.get());
  std::vector<float> prev_row(MR), bias(V), feat(H + MR);
  int32_t prev = anchor;
  for (size_t r = 0; r < size_t(k); ++r) {
    w_.markov_w1.row_f32(size_t(prev), prev_row.data());
    ops::matmul(w_.markov_w2, prev_row.data(), 1, bias.data(), pool_.get());
    float* lr = &out.logits[r * V];
    for (size_t v = 0; v < V; ++v) lr[v] += round_bf16(bias[v]);
    const int32_t d = argmax_lowest_id(lr, V);
    if (c.confidence_head) {
      std::copy(&out.hidden[r * H], &out.hidden[(r + 1) * H], feat.begin());
      std::copy(prev_row.begin(), prev_row.end(), feat.begin() + ptrdiff_t(H));
      float conf = 0;
      ops::matmul(w_.confidence, feat.data(), 1, &conf, nullptr);
      out.confidence.push_back(conf + w_.confidence_bias);
    }
    out.ids.push_back(d);
    prev = d;
  }
}

}  // namespace deltafin
