// Reference path (see reference_model.h). Deliberately naive: no SIMD, no
// batching, no caching tricks; every sum in double.
#include "reference_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "checkpoint/safetensors.h"
#include "core/dtype.h"

namespace deltafin::reference {

// ---------------------------------------------------------------- primitives

Vec Mat::apply(const Vec& x) const {
  Vec y(size_t(rows), 0.0);
  const double* xp = x.data();
  for (int r = 0; r < rows; ++r) {
    double acc = 0;
    const float* row = w.data() + size_t(r) * size_t(cols);
    for (int c = 0; c < cols; ++c) acc += double(row[c]) * xp[c];
    y[size_t(r)] = acc;
  }
  return y;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Vec rms_norm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (w.empty() ? 1.0 : w[i]) * (x[i] * r);
  return y;
}

Vec l2_norm(const Vec& x) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss + 1e-6);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r;
  return y;
}

double situ(double g, double u, double beta, double beta_lin) {
  return (beta * std::tanh(g / beta) * sigmoid(g)) * (beta_lin * std::tanh(u / beta_lin));
}

Vec depth_mix(const std::vector<const Vec*>& values, const Vec& norm_w, const Vec& proj, double eps) {
  const size_t n = values.size(), H = norm_w.size();
  Vec c(H);
  for (size_t d = 0; d < H; ++d) c[d] = norm_w[d] * proj[d];
  Vec s(n);
  for (size_t i = 0; i < n; ++i) {
    Vec k = rms_norm(*values[i], {}, eps);
    double acc = 0;
    for (size_t d = 0; d < H; ++d) acc += k[d] * c[d];
    s[i] = acc;
  }
  const double mx = *std::max_element(s.begin(), s.end());
  double z = 0;
  for (double& v : s) z += (v = std::exp(v - mx));
  Vec out(H, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t d = 0; d < H; ++d) out[d] += (s[i] / z) * (*values[i])[d];
  return out;
}

std::vector<int> top_k(const Vec& choice, int k) {
  std::vector<int> idx(choice.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return choice[size_t(a)] > choice[size_t(b)]; });
  idx.resize(size_t(k));
  return idx;
}

Result<Mat> decode_mxfp4(const uint8_t* packed, const uint8_t* scales, int rows, int cols, const std::string& what) {
  if (cols % kMxfp4Group) return error("{}: MXFP4 width {} is not a multiple of {}", what, cols, kMxfp4Group);
  Mat m;
  m.rows = rows;
  m.cols = cols;
  m.w.resize(size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const uint8_t s = scales[size_t(r) * size_t(cols / kMxfp4Group) + size_t(c / kMxfp4Group)];
      if (s == kE8M0Invalid) return error("{}: scale byte 255 at row {} group {}", what, r, c / kMxfp4Group);
      const uint8_t b = packed[size_t(r) * size_t(cols / 2) + size_t(c / 2)];
      const int code = (c % 2 == 0) ? (b & 0xF) : (b >> 4);
      m.w[size_t(r) * size_t(cols) + size_t(c)] = float(double(kE2M1[code]) * std::ldexp(1.0, int(s) - 127));
    }
  }
  return m;
}

Vec kda_head_step(std::vector<double>& S, int dk, int dv, const Vec& q, const Vec& k, const Vec& v, const Vec& g,
                  double beta) {
  auto at = [&](int i, int j) -> double& { return S[size_t(i) * size_t(dv) + size_t(j)]; };
  for (int i = 0; i < dk; ++i) {
    const double d = std::exp(g[size_t(i)]);
    for (int j = 0; j < dv; ++j) at(i, j) *= d;
  }
  Vec u(size_t(dv), 0.0);  // prediction of v from the decayed state
  for (int j = 0; j < dv; ++j)
    for (int i = 0; i < dk; ++i) u[size_t(j)] += k[size_t(i)] * at(i, j);
  for (int i = 0; i < dk; ++i)
    for (int j = 0; j < dv; ++j) at(i, j) += (beta * k[size_t(i)]) * (v[size_t(j)] - u[size_t(j)]);
  Vec y(size_t(dv), 0.0);  // read with the updated state
  for (int j = 0; j < dv; ++j)
    for (int i = 0; i < dk; ++i) y[size_t(j)] += q[size_t(i)] * at(i, j);
  return y;
}

Vec attend(const Vec& q, const std::vector<Vec>& keys, const std::vector<Vec>& values, double scale) {
  const size_t n = keys.size();
  Vec s(n);
  for (size_t t = 0; t < n; ++t) {
    double acc = 0;
    for (size_t d = 0; d < q.size(); ++d) acc += q[d] * keys[t][d];
    s[t] = acc * scale;
  }
  const double mx = *std::max_element(s.begin(), s.end());
  double z = 0;
  for (double& v : s) z += (v = std::exp(v - mx));
  Vec out(values[0].size(), 0.0);
  for (size_t t = 0; t < n; ++t)
    for (size_t d = 0; d < out.size(); ++d) out[d] += (s[t] / z) * values[t][d];
  return out;
}

namespace {

Vec slice(const Vec& x, size_t from, size_t n) { return Vec(x.begin() + long(from), x.begin() + long(from + n)); }

// Elementwise SiTU of two projections, then the down projection.
Vec situ_mlp(const ModelConfig& c, const Mat& gate, const Mat& up, const Mat& down, const Vec& x) {
  Vec g = gate.apply(x), u = up.apply(x), a(g.size());
  for (size_t i = 0; i < g.size(); ++i) a[i] = situ(g[i], u[i], c.situ_beta, c.situ_linear_beta);
  return down.apply(a);
}

// Shifts the window of each channel left by one and appends `cur`, then
// returns SiLU(Σ_j kernel[n][j] · window[n][j]).
Vec causal_conv(std::vector<double>& win, const Vec& kernel, const Vec& cur, int K) {
  Vec out(cur.size());
  for (size_t n = 0; n < cur.size(); ++n) {
    double* w = win.data() + n * size_t(K);
    for (int j = 0; j + 1 < K; ++j) w[j] = w[j + 1];
    w[K - 1] = cur[n];
    double acc = 0;
    for (int j = 0; j < K; ++j) acc += kernel[n * size_t(K) + size_t(j)] * w[j];
    out[n] = acc * sigmoid(acc);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- layers

Vec kda_forward(const ModelConfig& c, const KdaWeights& w, KdaState& st, const Vec& x) {
  const int NH = c.kda.heads, D = c.kda.head_dim, K = c.kda.conv_kernel;
  const Vec q = causal_conv(st.win_q, w.q_conv, w.q_proj.apply(x), K);
  const Vec k = causal_conv(st.win_k, w.k_conv, w.k_proj.apply(x), K);
  const Vec v = causal_conv(st.win_v, w.v_conv, w.v_proj.apply(x), K);
  const Vec a = w.f_b_proj.apply(w.f_a_proj.apply(x));
  const Vec b = w.b_proj.apply(x);
  const Vec gate = w.g_proj.apply(x);
  Vec y(size_t(NH) * size_t(D));
  for (int h = 0; h < NH; ++h) {
    const size_t o = size_t(h) * size_t(D);
    Vec qh = l2_norm(slice(q, o, size_t(D)));
    for (double& e : qh) e /= std::sqrt(double(D));
    const Vec kh = l2_norm(slice(k, o, size_t(D)));
    const Vec vh = slice(v, o, size_t(D));
    Vec g(static_cast<size_t>(D));
    for (int i = 0; i < D; ++i)
      g[size_t(i)] = double(c.kda.gate_lower_bound) *
                     sigmoid(std::exp(w.a_log[size_t(h)]) * (a[o + size_t(i)] + w.dt_bias[o + size_t(i)]));
    std::vector<double> S(st.S.begin() + long(o) * D, st.S.begin() + long(o + size_t(D)) * D);
    Vec yh = kda_head_step(S, D, D, qh, kh, vh, g, sigmoid(b[size_t(h)]));
    std::copy(S.begin(), S.end(), st.S.begin() + long(o) * D);
    yh = rms_norm(yh, w.o_norm, c.rms_eps);
    for (int j = 0; j < D; ++j) y[o + size_t(j)] = yh[size_t(j)] * sigmoid(gate[o + size_t(j)]);
  }
  return w.o_proj.apply(y);
}

Vec mla_forward(const ModelConfig& c, const MlaWeights& w, MlaState& st, const Vec& x) {
  const auto& m = c.mla;
  const size_t NH = size_t(m.heads), QK = size_t(m.qk_head_dim()), NOPE = size_t(m.qk_nope_dim),
               ROPE = size_t(m.qk_rope_dim), V = size_t(m.v_head_dim), R = size_t(m.kv_lora_rank);
  const Vec Q = w.q_b_proj.apply(rms_norm(w.q_a_proj.apply(x), w.q_a_norm, c.rms_eps));
  const Vec ckv = w.kv_a_proj.apply(x);
  const Vec kv = w.kv_b_proj.apply(rms_norm(slice(ckv, 0, R), w.kv_a_norm, c.rms_eps));
  const Vec kr = slice(ckv, R, ROPE);
  const Vec gate = w.g_proj.apply(x);
  if (st.keys.empty()) {
    st.keys.resize(NH);
    st.values.resize(NH);
  }
  Vec o(NH * V);
  const double scale = 1.0 / std::sqrt(double(QK));
  for (size_t h = 0; h < NH; ++h) {
    Vec key = slice(kv, h * (NOPE + V), NOPE);
    key.insert(key.end(), kr.begin(), kr.end());
    st.keys[h].push_back(std::move(key));
    st.values[h].push_back(slice(kv, h * (NOPE + V) + NOPE, V));
    const Vec oh = attend(slice(Q, h * QK, QK), st.keys[h], st.values[h], scale);
    for (size_t j = 0; j < V; ++j) o[h * V + j] = oh[j] * sigmoid(gate[h * V + j]);
  }
  return w.o_proj.apply(o);
}

Vec dense_forward(const ModelConfig& c, const DenseWeights& w, const Vec& x) {
  return situ_mlp(c, w.gate, w.up, w.down, x);
}

Vec moe_forward(const ModelConfig& c, const MoeWeights& w, const Vec& x) {
  const Vec logits = w.router.apply(x);
  Vec s(logits.size()), choice(logits.size());
  for (size_t e = 0; e < s.size(); ++e) {
    s[e] = sigmoid(logits[e]);
    choice[e] = s[e] + w.correction_bias[e];
  }
  const std::vector<int> route = top_k(choice, c.moe.top_k);
  double sum = 0;
  for (int e : route) sum += s[size_t(e)];
  const Vec r = w.latent_down.apply(x);
  Vec acc(r.size(), 0.0);
  for (int e : route) {
    const Expert& ex = w.experts[size_t(e)];
    const Vec h = situ_mlp(c, ex.w1, ex.w3, ex.w2, r);
    const double weight = s[size_t(e)] / (sum + 1e-20);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += weight * h[i];
  }
  Vec f = w.latent_up.apply(rms_norm(acc, w.latent_norm, c.rms_eps));
  const Vec shared = situ_mlp(c, w.shared_gate, w.shared_up, w.shared_down, x);
  for (size_t i = 0; i < f.size(); ++i) f[i] += shared[i];
  return f;
}

// ---------------------------------------------------------------- loading

namespace {

struct Loader {
  const Checkpoint& ck;

  Result<Vec> vec(const std::string& name, DType dt, const std::vector<int64_t>& shape) {
    DF_ASSIGN(const TensorInfo* t, ck.require(name, dt, shape));
    Vec out(t->numel());
    for (size_t i = 0; i < out.size(); ++i) {
      if (dt == DType::BF16) {
        uint16_t b;
        std::memcpy(&b, t->data + 2 * i, 2);
        out[i] = bf16_to_f32(b);
      } else {
        float f;
        std::memcpy(&f, t->data + 4 * i, 4);
        out[i] = f;
      }
    }
    return out;
  }
  Result<Vec> bf16(const std::string& name, int n) { return vec(name, DType::BF16, {n}); }
  Result<Vec> f32(const std::string& name, const std::vector<int64_t>& shape) { return vec(name, DType::F32, shape); }

  Result<Mat> mat(const std::string& name, int rows, int cols) {
    DF_ASSIGN(Vec v, vec(name, DType::BF16, {rows, cols}));
    Mat m;
    m.rows = rows;
    m.cols = cols;
    m.w.assign(v.begin(), v.end());  // BF16 values are exact in fp32
    return m;
  }

  Result<Mat> mxfp4(const std::string& base, int rows, int cols) {
    DF_ASSIGN(const TensorInfo* p, ck.require(base + ".weight_packed", DType::U8, {rows, cols / 2}));
    DF_ASSIGN(const TensorInfo* s, ck.require(base + ".weight_scale", DType::U8, {rows, cols / kMxfp4Group}));
    return decode_mxfp4(p->data, s->data, rows, cols, *s->file + ": tensor '" + s->name + "'");
  }
};

Status load_kda(Loader& L, const ModelConfig& c, const std::string& a, KdaWeights& w) {
  const int H = c.hidden, C = c.kda.channels(), D = c.kda.head_dim, K = c.kda.conv_kernel;
  DF_ASSIGN(w.q_proj, L.mat(a + "q_proj.weight", C, H));
  DF_ASSIGN(w.k_proj, L.mat(a + "k_proj.weight", C, H));
  DF_ASSIGN(w.v_proj, L.mat(a + "v_proj.weight", C, H));
  DF_ASSIGN(w.g_proj, L.mat(a + "g_proj.weight", C, H));
  DF_ASSIGN(w.f_a_proj, L.mat(a + "f_a_proj.weight", D, H));
  DF_ASSIGN(w.f_b_proj, L.mat(a + "f_b_proj.weight", C, D));
  DF_ASSIGN(w.b_proj, L.mat(a + "b_proj.weight", c.kda.heads, H));
  DF_ASSIGN(w.o_proj, L.mat(a + "o_proj.weight", H, C));
  DF_ASSIGN(w.q_conv, L.f32(a + "q_conv1d.weight", {C, 1, K}));
  DF_ASSIGN(w.k_conv, L.f32(a + "k_conv1d.weight", {C, 1, K}));
  DF_ASSIGN(w.v_conv, L.f32(a + "v_conv1d.weight", {C, 1, K}));
  DF_ASSIGN(w.dt_bias, L.f32(a + "dt_bias", {C}));
  DF_ASSIGN(w.o_norm, L.f32(a + "o_norm.weight", {D}));
  // A_log: one value per head, possibly zero-padded (docs/design/checkpoint.md).
  const std::string name = a + "A_log";
  const TensorInfo* t = L.ck.find(name);
  if (!t) return error("{}: tensor '{}': missing", L.ck.dir(), name);
  if (t->dtype != DType::F32 || t->shape.size() != 1 || t->shape[0] < c.kda.heads)
    return error("{}: tensor '{}': F32 [>= {}] expected", *t->file, name, c.kda.heads);
  DF_ASSIGN(Vec all, L.f32(name, t->shape));
  for (size_t i = size_t(c.kda.heads); i < all.size(); ++i)
    if (all[i] != 0.0) return error("{}: tensor '{}': padding entry {} is not zero", *t->file, name, i);
  w.a_log.assign(all.begin(), all.begin() + c.kda.heads);
  return {};
}

Status load_mla(Loader& L, const ModelConfig& c, const std::string& a, MlaWeights& w) {
  const auto& m = c.mla;
  const int H = c.hidden;
  DF_ASSIGN(w.q_a_proj, L.mat(a + "q_a_proj.weight", m.q_lora_rank, H));
  DF_ASSIGN(w.q_a_norm, L.bf16(a + "q_a_layernorm.weight", m.q_lora_rank));
  DF_ASSIGN(w.q_b_proj, L.mat(a + "q_b_proj.weight", m.heads * m.qk_head_dim(), m.q_lora_rank));
  DF_ASSIGN(w.kv_a_proj, L.mat(a + "kv_a_proj_with_mqa.weight", m.kv_lora_rank + m.qk_rope_dim, H));
  DF_ASSIGN(w.kv_a_norm, L.bf16(a + "kv_a_layernorm.weight", m.kv_lora_rank));
  DF_ASSIGN(w.kv_b_proj, L.mat(a + "kv_b_proj.weight", m.heads * (m.qk_nope_dim + m.v_head_dim), m.kv_lora_rank));
  DF_ASSIGN(w.g_proj, L.mat(a + "g_proj.weight", m.heads * m.v_head_dim, H));
  DF_ASSIGN(w.o_proj, L.mat(a + "o_proj.weight", H, m.heads * m.v_head_dim));
  return {};
}

Status load_moe(Loader& L, const ModelConfig& c, const std::string& p, MoeWeights& w) {
  const auto& m = c.moe;
  const int H = c.hidden;
  const std::string s = p + "block_sparse_moe.";
  DF_ASSIGN(w.router, L.mat(s + "gate.weight", m.num_experts, H));
  DF_ASSIGN(w.correction_bias, L.f32(s + "gate.e_score_correction_bias", {m.num_experts}));
  DF_ASSIGN(w.latent_down, L.mat(s + "routed_expert_down_proj.weight", m.latent, H));
  DF_ASSIGN(w.latent_norm, L.bf16(s + "routed_expert_norm.weight", m.latent));
  DF_ASSIGN(w.latent_up, L.mat(s + "routed_expert_up_proj.weight", H, m.latent));
  DF_ASSIGN(w.shared_gate, L.mat(s + "shared_experts.gate_proj.weight", m.shared_inter(), H));
  DF_ASSIGN(w.shared_up, L.mat(s + "shared_experts.up_proj.weight", m.shared_inter(), H));
  DF_ASSIGN(w.shared_down, L.mat(s + "shared_experts.down_proj.weight", H, m.shared_inter()));
  w.experts.resize(size_t(m.num_experts));
  for (int e = 0; e < m.num_experts; ++e) {
    const std::string x = s + "experts." + std::to_string(e) + ".";
    Expert& ex = w.experts[size_t(e)];
    DF_ASSIGN(ex.w1, L.mxfp4(x + "w1", m.expert_inter, m.latent));
    DF_ASSIGN(ex.w2, L.mxfp4(x + "w2", m.latent, m.expert_inter));
    DF_ASSIGN(ex.w3, L.mxfp4(x + "w3", m.expert_inter, m.latent));
  }
  return {};
}

}  // namespace

Result<ReferenceModel> ReferenceModel::load(const std::string& dir) {
  DF_ASSIGN(auto ck, Checkpoint::open(dir));
  ReferenceModel r;
  DF_ASSIGN(r.cfg_, ModelConfig::from_json(ck->config()));
  const ModelConfig& c = r.cfg_;
  Loader L{*ck};
  const int H = c.hidden;
  const std::string g = "language_model.model.";
  DF_ASSIGN(r.embed, L.mat(g + "embed_tokens.weight", c.vocab, H));
  DF_ASSIGN(r.lm_head, L.mat("language_model.lm_head.weight", c.vocab, H));
  DF_ASSIGN(r.final_norm, L.bf16(g + "norm.weight", H));
  DF_ASSIGN(r.out_res_norm, L.bf16(g + "output_attn_res_norm.weight", H));
  DF_ASSIGN(r.out_res_proj, L.vec(g + "output_attn_res_proj.weight", DType::BF16, {1, H}));
  r.layers_.resize(size_t(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& w = r.layers_[size_t(l)];
    const std::string p = g + "layers." + std::to_string(l) + ".";
    DF_ASSIGN(w.input_norm, L.bf16(p + "input_layernorm.weight", H));
    DF_ASSIGN(w.post_attention_norm, L.bf16(p + "post_attention_layernorm.weight", H));
    DF_ASSIGN(w.attn_res_norm, L.bf16(p + "self_attention_res_norm.weight", H));
    DF_ASSIGN(w.attn_res_proj, L.vec(p + "self_attention_res_proj.weight", DType::BF16, {1, H}));
    DF_ASSIGN(w.mlp_res_norm, L.bf16(p + "mlp_res_norm.weight", H));
    DF_ASSIGN(w.mlp_res_proj, L.vec(p + "mlp_res_proj.weight", DType::BF16, {1, H}));
    if (c.attention[size_t(l)] == AttentionKind::KDA)
      DF_TRY(load_kda(L, c, p + "self_attn.", w.kda));
    else
      DF_TRY(load_mla(L, c, p + "self_attn.", w.mla));
    if (c.ffn[size_t(l)] == FfnKind::Dense) {
      DF_ASSIGN(w.dense.gate, L.mat(p + "mlp.gate_proj.weight", c.dense_inter, H));
      DF_ASSIGN(w.dense.up, L.mat(p + "mlp.up_proj.weight", c.dense_inter, H));
      DF_ASSIGN(w.dense.down, L.mat(p + "mlp.down_proj.weight", H, c.dense_inter));
    } else {
      DF_TRY(load_moe(L, c, p, w.moe));
    }
  }
  return r;  // the checkpoint mapping is no longer needed: everything was copied
}

// ---------------------------------------------------------------- decoding

struct ReferenceModel::State {
  std::vector<KdaState> kda;  // per layer (unused for MLA layers)
  std::vector<MlaState> mla;  // per layer (unused for KDA layers)
};

ReferenceModel::State ReferenceModel::new_state() const {
  State st;
  st.kda.resize(size_t(cfg_.num_layers));
  st.mla.resize(size_t(cfg_.num_layers));
  const size_t C = size_t(cfg_.kda.channels()), K = size_t(cfg_.kda.conv_kernel), D = size_t(cfg_.kda.head_dim);
  for (int l = 0; l < cfg_.num_layers; ++l) {
    if (cfg_.attention[size_t(l)] != AttentionKind::KDA) continue;
    KdaState& k = st.kda[size_t(l)];
    k.win_q.assign(C * K, 0.0);
    k.win_k.assign(C * K, 0.0);
    k.win_v.assign(C * K, 0.0);
    k.S.assign(size_t(cfg_.kda.heads) * D * D, 0.0);
  }
  return st;
}

Result<Vec> ReferenceModel::step(State& st, int32_t token) const {
  const ModelConfig& c = cfg_;
  if (token < 0 || token >= c.vocab) return error("reference: token id {} outside 0..{}", token, c.vocab - 1);
  const double eps = c.rms_eps;
  Vec p(embed.w.begin() + long(token) * c.hidden, embed.w.begin() + long(token + 1) * c.hidden);
  std::vector<Vec> anchors;
  auto mix = [&](const Vec& partial, const Vec& norm_w, const Vec& proj) {
    std::vector<const Vec*> values;
    for (const Vec& a : anchors) values.push_back(&a);
    values.push_back(&partial);
    return depth_mix(values, norm_w, proj, eps);
  };
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = layers_[size_t(l)];
    const Vec a_in = anchors.empty() ? p : mix(p, w.attn_res_norm, w.attn_res_proj);
    Vec base = p;
    if (l % c.attn_res_block == 0) {
      anchors.push_back(p);
      base.assign(p.size(), 0.0);
    }
    const Vec x_attn = rms_norm(a_in, w.input_norm, eps);
    const Vec o = c.attention[size_t(l)] == AttentionKind::KDA ? kda_forward(c, w.kda, st.kda[size_t(l)], x_attn)
                                                                : mla_forward(c, w.mla, st.mla[size_t(l)], x_attn);
    Vec p_mid(p.size());
    for (size_t i = 0; i < p.size(); ++i) p_mid[i] = base[i] + o[i];
    const Vec x_ffn = rms_norm(mix(p_mid, w.mlp_res_norm, w.mlp_res_proj), w.post_attention_norm, eps);
    const Vec f = c.ffn[size_t(l)] == FfnKind::Dense ? dense_forward(c, w.dense, x_ffn) : moe_forward(c, w.moe, x_ffn);
    for (size_t i = 0; i < p.size(); ++i) p[i] = p_mid[i] + f[i];
  }
  return lm_head.apply(rms_norm(mix(p, out_res_norm, out_res_proj), final_norm, eps));
}

Result<std::vector<Vec>> ReferenceModel::score(const std::vector<int32_t>& tokens) const {
  State st = new_state();
  std::vector<Vec> out;
  for (int32_t t : tokens) {
    DF_ASSIGN(Vec logits, step(st, t));
    out.push_back(std::move(logits));
  }
  return out;
}

Result<ReferenceRun> ReferenceModel::greedy(const std::vector<int32_t>& prompt, int max_new) const {
  if (prompt.empty()) return error("reference: empty prompt");
  if (max_new < 0) return error("reference: max_new {} is negative", max_new);
  State st = new_state();
  Vec logits;
  for (int32_t t : prompt) {
    DF_ASSIGN(logits, step(st, t));
  }
  ReferenceRun run;
  for (int i = 0; i < max_new; ++i) {
    if (i > 0) {
      DF_ASSIGN(logits, step(st, run.tokens.back()));
    }
    // Argmax, ties to the lowest id (strict > keeps the first maximum).
    size_t best = 0;
    for (size_t v = 1; v < logits.size(); ++v)
      if (logits[v] > logits[best]) best = v;
    double second = -INFINITY;
    for (size_t v = 0; v < logits.size(); ++v)
      if (v != best) second = std::max(second, logits[v]);
    run.tokens.push_back(int32_t(best));
    run.logits.emplace_back(logits.begin(), logits.end());
    run.margins.push_back(logits[best] - second);
  }
  return run;
}

}  // namespace deltafin::reference
