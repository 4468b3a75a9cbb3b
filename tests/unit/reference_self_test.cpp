// Checks the reference path's primitive pieces in isolation, with values
// derived by hand or from properties that hold exactly (no model file needed).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "checkpoint/safetensors.h"
#include "reference_model.h"

namespace deltafin::reference {
namespace {

Mat random_mat(int rows, int cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  Mat m;
  m.rows = rows;
  m.cols = cols;
  for (int i = 0; i < rows * cols; ++i) m.w.push_back(d(rng));
  return m;
}

Vec random_vec(int n, std::mt19937& rng) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  Vec v;
  for (int i = 0; i < n; ++i) v.push_back(d(rng));
  return v;
}

void expect_near(const Vec& a, const Vec& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "index " << i;
}

TEST(ReferenceSelfTest, SituValuesAndBounds) {
  // 4·tanh(0.5)·σ(2) · 25·tanh(0.2) = 1.848468629 · 0.880797078 · 4.934383006
  EXPECT_NEAR(situ(2.0, 5.0, 4.0, 25.0), 8.0337961166, 1e-9);
  EXPECT_EQ(situ(0.0, 3.0, 4.0, 25.0), 0.0);
  EXPECT_EQ(situ(3.0, 0.0, 4.0, 25.0), 0.0);
  // Saturation: the gate side tends to beta, the up side to beta_lin.
  EXPECT_NEAR(situ(60.0, 1000.0, 4.0, 25.0), 100.0, 1e-6);
  EXPECT_NEAR(situ(60.0, -1000.0, 4.0, 25.0), -100.0, 1e-6);
  // Near zero it is SiLU(g)·u (tanh(x) ≈ x).
  const double g = 1e-3, u = 2e-3;
  EXPECT_NEAR(situ(g, u, 4.0, 25.0), g * sigmoid(g) * u, 1e-6 * g * u);
  // The betas are parameters, not constants.
  EXPECT_NEAR(situ(60.0, 1000.0, 2.0, 10.0), 20.0, 1e-6);
}

TEST(ReferenceSelfTest, Mxfp4DecodesKnownBytes) {
  // Two rows of 64 columns (two groups each).
  std::vector<uint8_t> packed(2 * 32), scales(2 * 2);
  for (int j = 0; j < 32; ++j) {
    packed[size_t(j)] = 0x21;       // row 0: even col code 1 (0.5), odd col code 2 (1.0)
    packed[size_t(32 + j)] = 0xF8;  // row 1: even col code 8 (-0), odd col code 15 (-6)
  }
  scales = {128, 130, 125, 127};  // row 0: x2, x8; row 1: x0.25, x1
  auto m = decode_mxfp4(packed.data(), scales.data(), 2, 64, "test");
  ASSERT_TRUE(m.ok()) << m.message();
  auto at = [&](int r, int c) { return m->w[size_t(r) * 64 + size_t(c)]; };
  EXPECT_EQ(at(0, 0), 1.0f);
  EXPECT_EQ(at(0, 1), 2.0f);
  EXPECT_EQ(at(0, 31), 2.0f);
  EXPECT_EQ(at(0, 32), 4.0f);
  EXPECT_EQ(at(0, 63), 8.0f);
  EXPECT_EQ(at(1, 0), 0.0f);
  EXPECT_TRUE(std::signbit(at(1, 0)));
  EXPECT_EQ(at(1, 1), -1.5f);
  EXPECT_EQ(at(1, 33), -6.0f);

  // Every code at scale 127 (x1) gives the E2M1 table.
  const float table[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  std::vector<uint8_t> p2(16), s2 = {127};
  for (int j = 0; j < 16; ++j) p2[size_t(j)] = uint8_t(((2 * j + 1) % 16) << 4 | ((2 * j) % 16));
  auto all = decode_mxfp4(p2.data(), s2.data(), 1, 32, "table");
  ASSERT_TRUE(all.ok());
  for (int c = 0; c < 32; ++c) EXPECT_EQ(all->w[size_t(c)], table[c % 16]) << "column " << c;

  // The smallest and largest valid exponents decode exactly.
  std::vector<uint8_t> p3(16, 0x22), s3 = {0};
  auto tiny = decode_mxfp4(p3.data(), s3.data(), 1, 32, "small");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->w[0], std::ldexp(1.0f, -127));
  s3 = {254};
  auto big = decode_mxfp4(p3.data(), s3.data(), 1, 32, "big");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->w[0], std::ldexp(1.0f, 127));

  // Scale byte 255 (the OCP NaN encoding) is an error naming the tensor.
  scales[3] = 255;
  auto bad = decode_mxfp4(packed.data(), scales.data(), 2, 64, "layer 1 expert 7 w2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("layer 1 expert 7 w2"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("255"), std::string::npos) << bad.message();
}

TEST(ReferenceSelfTest, RmsNorm) {
  // mean(x^2) = 12.5, so x·rsqrt(12.5) = [0.8485.., 1.1313..], times w = [1, 2].
  const Vec y = rms_norm({3.0, 4.0}, {1.0, 2.0}, 0.0);
  EXPECT_NEAR(y[0], 3.0 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(y[1], 8.0 / std::sqrt(12.5), 1e-15);
  // Without a weight the result has unit RMS; eps keeps zero finite.
  const Vec u = rms_norm({1.0, -2.0, 5.0, 0.5}, {}, 0.0);
  double ss = 0;
  for (double v : u) ss += v * v;
  EXPECT_NEAR(ss / 4.0, 1.0, 1e-14);
  for (double v : rms_norm({0.0, 0.0}, {1.0, 1.0}, 1e-5)) EXPECT_EQ(v, 0.0);
  // L2 normalisation: unit length up to the 1e-6 epsilon.
  const Vec l = l2_norm({3.0, 4.0});
  EXPECT_NEAR(l[0], 3.0 / std::sqrt(25.0 + 1e-6), 1e-15);
  EXPECT_NEAR(l[1], 4.0 / std::sqrt(25.0 + 1e-6), 1e-15);
}

TEST(ReferenceSelfTest, DepthMix) {
  std::mt19937 rng(7);
  const Vec v = random_vec(16, rng), w = random_vec(16, rng), q = random_vec(16, rng);
  // One value: softmax over one score is 1, the value comes back.
  expect_near(depth_mix({&v}, w, q, 1e-5), v, 1e-15);
  // v and 2v have the same normalised key, hence equal weights: the mean.
  Vec v2 = v;
  for (double& e : v2) e *= 2.0;
  Vec mean = v;
  for (double& e : mean) e *= 1.5;
  expect_near(depth_mix({&v, &v2}, w, q, 0.0), mean, 1e-12);
  // A pseudo-query aligned with one value's direction picks it out.
  const Vec a = {1, 0, 0, 0}, b = {0, 1, 0, 0}, ones = {1, 1, 1, 1}, sharp = {0, -100, 0, 0};
  expect_near(depth_mix({&a, &b}, ones, sharp, 1e-5), a, 1e-12);
  // Scores use norm_w ⊙ proj: swapping the two factors changes nothing.
  expect_near(depth_mix({&v, &v2, &q}, w, q, 1e-5), depth_mix({&v, &v2, &q}, q, w, 1e-5), 1e-14);
}

TEST(ReferenceSelfTest, TopKDescendingTiesToLowerId) {
  EXPECT_EQ(top_k({1.0, 3.0, 3.0, 2.0, 3.0}, 3), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(top_k({1.0, 3.0, 3.0, 2.0, 3.0}, 4), (std::vector<int>{1, 2, 4, 3}));
  EXPECT_EQ(top_k({0.5, 0.5, 0.5, 0.5}, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(top_k({-1.0, 5.0, 0.0}, 3), (std::vector<int>{1, 2, 0}));
}

TEST(ReferenceSelfTest, KdaDeltaRule) {
  const int d = 3;
  std::vector<double> S(size_t(d * d), 0.0);
  const Vec k = {1, 0, 0}, q = {0.5, 0.25, 0}, v1 = {1, 2, 3}, v2 = {-4, 5, 0.5}, g0 = {0, 0, 0};
  // From zero state: S = beta k v^T, read y = beta (k·q) v.
  const Vec y1 = kda_head_step(S, d, d, q, k, v1, g0, 0.5);
  expect_near(y1, {0.25, 0.5, 0.75}, 1e-15);
  // Same unit key, beta 1, no decay: the delta rule overwrites v1 with v2.
  const Vec y2 = kda_head_step(S, d, d, q, k, v2, g0, 1.0);
  expect_near(y2, {-2.0, 2.5, 0.25}, 1e-15);
  // Decay applies along the key index before the write: row 0 scales by exp(-1),
  // then with beta 0 nothing is written.
  const Vec y3 = kda_head_step(S, d, d, q, k, v1, {-1.0, 0.0, 0.0}, 0.0);
  expect_near(y3, {-2.0 * std::exp(-1.0), 2.5 * std::exp(-1.0), 0.25 * std::exp(-1.0)}, 1e-15);
}

TEST(ReferenceSelfTest, AttendIsCausalSoftmax) {
  const Vec q = {1, 2};
  expect_near(attend(q, {{0.3, -1}}, {{7, 8, 9}}, 0.1), {7, 8, 9}, 1e-15);
  // Equal scores: the mean of the values.
  expect_near(attend(q, {{2, 0}, {0, 1}}, {{1, 1}, {3, 5}}, 1.0), {2, 3}, 1e-15);
  // Two scores s, 0: weights e^s/(1+e^s) and 1/(1+e^s).
  const Vec o = attend(q, {{1, 0}, {0, 0}}, {{1, 0}, {0, 1}}, 0.5);
  EXPECT_NEAR(o[0], sigmoid(0.5), 1e-15);
  EXPECT_NEAR(o[1], 1.0 - sigmoid(0.5), 1e-15);
}

ModelConfig small_mla_config() {
  ModelConfig c;
  c.hidden = 10;
  c.rms_eps = 1e-5f;
  c.mla.heads = 2;
  c.mla.q_lora_rank = 8;
  c.mla.kv_lora_rank = 6;
  c.mla.qk_nope_dim = 4;
  c.mla.qk_rope_dim = 2;
  c.mla.v_head_dim = 3;
  return c;
}

MlaWeights random_mla(const ModelConfig& c, std::mt19937& rng) {
  const auto& m = c.mla;
  MlaWeights w;
  w.q_a_proj = random_mat(m.q_lora_rank, c.hidden, rng);
  w.q_a_norm = random_vec(m.q_lora_rank, rng);
  w.q_b_proj = random_mat(m.heads * m.qk_head_dim(), m.q_lora_rank, rng);
  w.kv_a_proj = random_mat(m.kv_lora_rank + m.qk_rope_dim, c.hidden, rng);
  w.kv_a_norm = random_vec(m.kv_lora_rank, rng);
  w.kv_b_proj = random_mat(m.heads * (m.qk_nope_dim + m.v_head_dim), m.kv_lora_rank, rng);
  w.g_proj = random_mat(m.heads * m.v_head_dim, c.hidden, rng);
  w.o_proj = random_mat(c.hidden, m.heads * m.v_head_dim, rng);
  return w;
}

TEST(ReferenceSelfTest, MlaOnePositionIsGatedValueProjection) {
  const ModelConfig c = small_mla_config();
  std::mt19937 rng(11);
  const MlaWeights w = random_mla(c, rng);
  const Vec x = random_vec(c.hidden, rng);
  MlaState st;
  const Vec out = mla_forward(c, w, st, x);

  // With one position the softmax weight is 1: o_h = v_h, whatever the query.
  const Vec ckv = w.kv_a_proj.apply(x);
  const Vec latent(ckv.begin(), ckv.begin() + c.mla.kv_lora_rank);
  const Vec kv = w.kv_b_proj.apply(rms_norm(latent, w.kv_a_norm, c.rms_eps));
  const Vec gate = w.g_proj.apply(x);
  Vec o;
  for (int h = 0; h < c.mla.heads; ++h)
    for (int j = 0; j < c.mla.v_head_dim; ++j) {
      const size_t row = size_t(h * (c.mla.qk_nope_dim + c.mla.v_head_dim) + c.mla.qk_nope_dim + j);
      o.push_back(kv[row] * sigmoid(gate[size_t(h * c.mla.v_head_dim + j)]));
    }
  expect_near(out, w.o_proj.apply(o), 1e-12);

  // The same token again: identical keys and values, so the output repeats.
  expect_near(mla_forward(c, w, st, x), out, 1e-12);
  ASSERT_EQ(st.keys[0].size(), 2u);
  // A different token sees the first two positions: its output differs from
  // what it gives alone.
  const Vec y = random_vec(c.hidden, rng);
  MlaState alone;
  const Vec with_history = mla_forward(c, w, st, y);
  const Vec fresh = mla_forward(c, w, alone, y);
  double diff = 0;
  for (size_t i = 0; i < fresh.size(); ++i) diff = std::max(diff, std::abs(fresh[i] - with_history[i]));
  EXPECT_GT(diff, 1e-6);
}

TEST(ReferenceSelfTest, KdaFirstTokenUsesLastConvTap) {
  ModelConfig c;
  c.hidden = 6;
  c.rms_eps = 1e-5f;
  c.kda.heads = 2;
  c.kda.head_dim = 4;
  c.kda.conv_kernel = 4;
  c.kda.gate_lower_bound = -5.0f;
  std::mt19937 rng(5);
  const int C = c.kda.channels(), D = c.kda.head_dim, K = c.kda.conv_kernel;
  KdaWeights w;
  w.q_proj = random_mat(C, c.hidden, rng);
  w.k_proj = random_mat(C, c.hidden, rng);
  w.v_proj = random_mat(C, c.hidden, rng);
  w.g_proj = random_mat(C, c.hidden, rng);
  w.f_a_proj = random_mat(D, c.hidden, rng);
  w.f_b_proj = random_mat(C, D, rng);
  w.b_proj = random_mat(c.kda.heads, c.hidden, rng);
  w.o_proj = random_mat(c.hidden, C, rng);
  w.q_conv = random_vec(C * K, rng);
  w.k_conv = random_vec(C * K, rng);
  w.v_conv = random_vec(C * K, rng);
  w.a_log = random_vec(c.kda.heads, rng);
  w.dt_bias = random_vec(C, rng);
  w.o_norm = random_vec(D, rng);
  KdaState st;
  st.win_q.assign(size_t(C * K), 0.0);
  st.win_k = st.win_q;
  st.win_v = st.win_q;
  st.S.assign(size_t(c.kda.heads * D * D), 0.0);
  const Vec x = random_vec(c.hidden, rng);
  const Vec out = kda_forward(c, w, st, x);

  // From zero state the windows hold only the current token in the last slot,
  // and the state read is beta·(k·q)·v per head.
  auto conv = [&](const Mat& W, const Vec& kernel) {
    Vec p = W.apply(x);
    for (int n = 0; n < C; ++n) {
      const double a = kernel[size_t(n * K + K - 1)] * p[size_t(n)];
      p[size_t(n)] = a * sigmoid(a);
    }
    return p;
  };
  const Vec q = conv(w.q_proj, w.q_conv), k = conv(w.k_proj, w.k_conv), v = conv(w.v_proj, w.v_conv);
  const Vec b = w.b_proj.apply(x), g = w.g_proj.apply(x);
  Vec y;
  for (int h = 0; h < c.kda.heads; ++h) {
    Vec qh(q.begin() + h * D, q.begin() + (h + 1) * D), kh(k.begin() + h * D, k.begin() + (h + 1) * D);
    qh = l2_norm(qh);
    kh = l2_norm(kh);
    double kq = 0;
    for (int i = 0; i < D; ++i) kq += kh[size_t(i)] * qh[size_t(i)] / std::sqrt(double(D));
    Vec yh;
    for (int j = 0; j < D; ++j) yh.push_back(sigmoid(b[size_t(h)]) * kq * v[size_t(h * D + j)]);
    yh = rms_norm(yh, w.o_norm, c.rms_eps);
    for (int j = 0; j < D; ++j) y.push_back(yh[size_t(j)] * sigmoid(g[size_t(h * D + j)]));
  }
  expect_near(out, w.o_proj.apply(y), 1e-12);
  // The window now ends with the current pre-activation projection.
  const Vec pq = w.q_proj.apply(x);
  for (int n = 0; n < C; ++n) EXPECT_EQ(st.win_q[size_t(n * K + K - 1)], pq[size_t(n)]);
}

// A generated `tiny` checkpoint in a temporary directory, removed afterwards.
struct TinyDir {
  std::filesystem::path path;
  int status = -1;
  explicit TinyDir(int seed)
      : path(std::filesystem::temp_directory_path() / fmt::format("deltafin-refself-{}-{}", ::getpid(), seed)) {
    std::filesystem::remove_all(path);
    status = std::system(fmt::format("'{}' make-model --preset tiny --out '{}' --seed {} > /dev/null", DELTAFIN_BINARY,
                                     path.string(), seed)
                             .c_str());
  }
  ~TinyDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

TEST(ReferenceSelfTest, TinyModelIsCausalAndGreedyFeedsBack) {
  TinyDir dir(5);
  ASSERT_EQ(dir.status, 0) << "make-model --preset tiny failed";
  auto ref = ReferenceModel::load(dir.path.string());
  ASSERT_TRUE(ref.ok()) << ref.message();
  const int vocab = ref->config().vocab;

  const std::vector<int32_t> prompt = {3, 141, 59, 26};
  auto run = ref->greedy(prompt, 6);
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_EQ(run->tokens.size(), 6u);
  // Each decided step's logits are those of the prompt plus the tokens emitted
  // so far, and the token is their argmax.
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), run->tokens.begin(), run->tokens.end() - 1);
  auto scored = ref->score(seq);
  ASSERT_TRUE(scored.ok()) << scored.message();
  for (size_t i = 0; i < run->tokens.size(); ++i) {
    const Vec& l = (*scored)[prompt.size() - 1 + i];
    ASSERT_EQ(l.size(), size_t(vocab));
    for (size_t v = 0; v < l.size(); ++v) ASSERT_EQ(run->logits[i][v], float(l[v])) << "step " << i;
    for (size_t v = 0; v < l.size(); ++v) {
      ASSERT_TRUE(std::isfinite(l[v]));
      EXPECT_LE(l[v], l[size_t(run->tokens[i])]) << "step " << i << " token is not the argmax";
    }
    EXPECT_GT(run->margins[i], 0.0);
  }

  // Causal: a later token never changes earlier positions; the state carries
  // history, so the same token after a different prefix gives other logits.
  auto a = ref->score({7, 8, 9, 10});
  auto b = ref->score({7, 8, 9, 200});
  auto c = ref->score({100, 8, 9, 10});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t t = 0; t < 3; ++t) EXPECT_EQ((*a)[t], (*b)[t]) << "position " << t;
  EXPECT_NE((*a)[3], (*b)[3]);
  EXPECT_NE((*a)[3], (*c)[3]);

  // Bad input is an error, not a crash.
  auto out_of_range = ref->greedy({1, vocab}, 2);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.message().find(std::to_string(vocab)), std::string::npos) << out_of_range.message();
  EXPECT_FALSE(ref->greedy({}, 2).ok());
  EXPECT_FALSE(ref->greedy({-1}, 2).ok());
}

TEST(ReferenceSelfTest, LoadRejectsMxfp4ScaleByte255) {
  TinyDir dir(6);
  ASSERT_EQ(dir.status, 0) << "make-model --preset tiny failed";
  const std::string name = "language_model.model.layers.1.block_sparse_moe.experts.3.w2.weight_scale";
  std::string file;
  uint64_t offset = 0;
  {
    auto ck = Checkpoint::open(dir.path.string());
    ASSERT_TRUE(ck.ok()) << ck.message();
    const TensorInfo* t = (*ck)->find(name);
    ASSERT_NE(t, nullptr);
    file = *t->file;
    offset = t->file_offset + 5;
  }
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(offset));
    f.put(char(0xFF));
  }
  auto ref = ReferenceModel::load(dir.path.string());
  ASSERT_FALSE(ref.ok());
  EXPECT_NE(ref.message().find(name), std::string::npos) << ref.message();
  EXPECT_NE(ref.message().find("255"), std::string::npos) << ref.message();
}

TEST(ReferenceSelfTest, LoadReportsMissingDirectory) {
  auto r = ReferenceModel::load("/nonexistent/deltafin-reference-model");
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.message().empty());
}

}  // namespace
}  // namespace deltafin::reference
