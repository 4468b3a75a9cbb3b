// Dense SiTU FFN (layer 0) and the latent MoE (spec §2.6, §2.7).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>

#include "kernels/matmul.h"
#include "model/layer_ops.h"
#include "model/layers.h"

namespace deltafin::layers {

namespace {

void situ_rows(const float* g, const float* u, size_t n, const ModelConfig& cfg, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = ops::situ(g[i], u[i], cfg.situ_beta, cfg.situ_linear_beta);
}

// One routed expert over the rows routed to it: gathers their latents, runs
// W2 · SiTU(W1 x, W3 x), and writes each row's result into its route slot.
void run_expert(const ModelConfig& cfg, const ExpertWeights& ew, int expert, const int* ids, size_t TK,
                const float* lat, float* slots, ThreadPool* pool, std::vector<size_t>& rows, std::vector<float>& buf) {
  const size_t K = cfg.moe.top_k, LT = cfg.moe.latent, I = cfg.moe.expert_inter;
  rows.clear();
  for (size_t i = 0; i < TK; ++i)
    if (ids[i] == expert) rows.push_back(i);
  const size_t n = rows.size();
  float* xe = Scratch::take(buf, n * (2 * LT + 2 * I));
  float* h1 = xe + n * LT;
  float* h3 = h1 + n * I;
  float* he = h3 + n * I;
  for (size_t r = 0; r < n; ++r) std::copy(lat + (rows[r] / K) * LT, lat + (rows[r] / K + 1) * LT, xe + r * LT);
  kernels::matmul_mxfp4(ew.w1.packed, ew.w1.scales, I, LT, xe, n, h1, pool);
  kernels::matmul_mxfp4(ew.w3.packed, ew.w3.scales, I, LT, xe, n, h3, pool);
  situ_rows(h1, h3, n * I, cfg, h1);
  kernels::matmul_mxfp4(ew.w2.packed, ew.w2.scales, LT, I, h1, n, he, pool);
  for (size_t r = 0; r < n; ++r) std::copy(he + r * LT, he + (r + 1) * LT, slots + rows[r] * LT);
}

using Clock = std::chrono::steady_clock;

// While a layer's reads are in flight: guess the next MoE layer's experts
// with its router on the state known so far (next.input: the residual stream
// plus the shared experts' output `sh`; it changes little in one layer) and
// start reading them behind this layer's demand. Only the timing of reads
// depends on the guess, never a value.
void guess_next_layer(const ModelConfig& cfg, const NextLayerGuess& next, ExpertSource& src, const float* sh,
                      size_t T, Scratch& s, ThreadPool* pool) {
  if (!next.w) return;
  const size_t E = cfg.moe.num_experts;
  const int P = std::min(next.per_row, int(E));
  float* nlog = Scratch::take(s.e, T * E);
  ops::matmul(next.w->router, next.input(next.ctx, sh), T, nlog, pool);
  thread_local std::vector<int> guess, picks;
  thread_local std::vector<float> unused;
  guess.clear();
  picks.resize(size_t(P));
  unused.resize(size_t(P));
  for (size_t t = 0; t < T; ++t) {
    route(nlog + t * E, next.w->correction_bias.data(), int(E), P, picks.data(), unused.data());
    for (int e : picks)
      if (std::find(guess.begin(), guess.end(), e) == guess.end()) guess.push_back(e);
  }
  src.prefetch(next.layer, guess);
}

// Computes the experts of one begin() (`tile`, views in `ew`) as each
// becomes ready, while later ones are still arriving; each writes only its
// own route slots, so the order in which experts finish cannot change any
// value. Few rows per expert (decode, short verify blocks): each thread takes
// whole experts, so small products do not pay a thread hand-off each. Many
// rows per expert (prefill): each product's output rows are split over the
// threads. Either way every value is the kernel contract's. Returns the
// compute's idle time waiting for experts (per pool thread when parallel).
Result<double> compute_experts(const ModelConfig& cfg, ExpertSource& src, std::span<const int> tile,
                               const ExpertWeights* ew, const int* routed, size_t T, size_t union_size,
                               const float* lat, float* slots, Scratch& s, ThreadPool* pool) {
  const size_t K = cfg.moe.top_k, n = tile.size();
  double waited = 0;
  const bool by_expert = pool && pool->size() > 1 && n >= 2 * size_t(pool->size()) && T * K <= 4 * union_size;
  if (!by_expert) {
    thread_local std::vector<size_t> rows;
    for (size_t u = 0; u < n; ++u) {
      const auto w0 = Clock::now();
      DF_TRY(src.wait(u));
      waited += std::chrono::duration<double>(Clock::now() - w0).count();
      run_expert(cfg, ew[u], tile[u], routed, T * K, lat, slots, pool, rows, s.h);
    }
    return waited;
  }
  std::mutex mu;
  Status failed;
  double thread_wait = 0;
  // Experts are handed out in request order as threads free up (not in
  // fixed halves): reads finish roughly in that order, so no thread sits on
  // a late half while the other has nothing left.
  std::atomic<size_t> next{0};
  const int* experts = tile.data();
  pool->parallel_for(size_t(pool->size()), 1, [&](size_t, size_t) {
    thread_local std::vector<size_t> my_rows;
    thread_local std::vector<float> my_buf;
    double my_wait = 0;
    Status my_status;
    for (size_t u = next++; u < n && my_status.ok(); u = next++) {
      const auto w0 = Clock::now();
      my_status = src.wait(u);
      my_wait += std::chrono::duration<double>(Clock::now() - w0).count();
      if (my_status.ok()) run_expert(cfg, ew[u], experts[u], routed, T * K, lat, slots, nullptr, my_rows, my_buf);
    }
    std::lock_guard<std::mutex> lock(mu);
    thread_wait += my_wait;
    if (failed.ok() && !my_status.ok()) failed = my_status;
  });
  DF_TRY(failed);
  return thread_wait / pool->size();
}

}  // namespace

// out = down · SiTU(gate · x, up · x): the dense FFN and the fused shared experts.
void situ_mlp(const ModelConfig& cfg, const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
              size_t T, float* out, std::vector<float>& gbuf, std::vector<float>& ubuf, ThreadPool* pool) {
  const size_t I = size_t(gate.rows);
  float* g = Scratch::take(gbuf, T * I);
  float* u = Scratch::take(ubuf, T * I);
  ops::matmul(gate, x, T, g, pool);
  ops::matmul(up, x, T, u, pool);
  situ_rows(g, u, T * I, cfg, g);
  ops::matmul(down, g, T, out, pool);
}

void dense_ffn(const ModelConfig& cfg, const LayerWeights& w, const float* x, size_t T, float* out, Scratch& s,
               ThreadPool* pool) {
  situ_mlp(cfg, w.gate_proj, w.up_proj, w.down_proj, x, T, out, s.a, s.b, pool);
}

void route(const float* logits, const float* bias, int E, int k, int* experts, float* weights) {
  // Selection uses sigmoid + bias; ties go to the lower id.
  thread_local std::vector<int> order;
  thread_local std::vector<float> score, choice;
  order.resize(E);
  score.resize(E);
  choice.resize(E);
  for (int e = 0; e < E; ++e) {
    score[e] = ops::sigmoid(logits[e]);
    choice[e] = score[e] + bias[e];
  }
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
  });
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum = sum + score[order[i]];
  for (int i = 0; i < k; ++i) {
    experts[i] = order[i];
    weights[i] = score[order[i]] / (sum + 1e-20f);
  }
}

Status moe_ffn(const ModelConfig& cfg, const LayerWeights& w, int layer, ExpertSource& src, const float* x, size_t T,
               float* out, Scratch& s, ThreadPool* pool, MoeStats* stats, const RouteObserver& observer,
               int64_t start_pos, const NextLayerGuess& next) {
  const auto& m = cfg.moe;
  const size_t H = cfg.hidden, E = m.num_experts, K = m.top_k, LT = m.latent;
  float* logits = Scratch::take(s.a, T * E);
  float* lat = Scratch::take(s.b, T * LT);
  float* slots = Scratch::take(s.c, T * K * LT);  // each (row, route slot)'s expert output
  ops::matmul(w.router, x, T, logits, pool);
  ops::matmul(w.latent_down, x, T, lat, pool);

  // Reused across calls: no allocation once the largest block has been seen.
  thread_local std::vector<int> ids, uni;
  thread_local std::vector<float> wts;
  thread_local std::vector<ExpertWeights> ew;
  ids.resize(T * K);
  wts.resize(T * K);
  for (size_t t = 0; t < T; ++t)
    route(logits + t * E, w.correction_bias.data(), int(E), int(K), ids.data() + t * K, wts.data() + t * K);

  if (observer) observer(start_pos, layer, T, int(K), std::span<const int>(ids.data(), T * K));

  // The union of the block's experts, each fetched once (ascending id).
  uni.assign(ids.begin(), ids.end());
  std::sort(uni.begin(), uni.end());
  uni.erase(std::unique(uni.begin(), uni.end()), uni.end());

  // A union larger than the source holds at once (a long prefill block of a
  // model with large experts) is fetched in tiles, one after the other: each
  // expert is still read once per layer per block.
  const size_t cap = std::max<size_t>(1, std::min(uni.size(), src.max_batch()));
  ew.resize(cap);
  float* sh = Scratch::take(s.g, T * H);  // the shared experts' output
  double waited = 0;
  for (size_t first = 0; first < uni.size(); first += cap) {
    const std::span<const int> tile(uni.data() + first, std::min(cap, uni.size() - first));
    const auto t0 = Clock::now();
    DF_TRY(src.begin(layer, tile, std::span<ExpertWeights>(ew.data(), tile.size())));
    waited += std::chrono::duration<double>(Clock::now() - t0).count();
    if (first == 0) {
      // The fused shared experts need no routed expert: compute them while the reads are in flight.
      situ_mlp(cfg, w.shared_gate, w.shared_up, w.shared_down, x, T, sh, s.e, s.f, pool);
      guess_next_layer(cfg, next, src, sh, T, s, pool);
    }
    DF_ASSIGN(const double tile_wait, compute_experts(cfg, src, tile, ew.data(), ids.data(), T, uni.size(), lat, slots,
                                                      s, pool));
    waited += tile_wait;
  }
  if (stats) {
    stats->seconds_acquire += waited;
    stats->experts += uni.size();
    stats->bytes += uni.size() * cfg.expert_bytes();
  }

  // Combine in route order: acc = acc + (w_i * h_i), then the latent norm.
  float* acc = Scratch::take(s.d, T * LT);
  for (size_t t = 0; t < T; ++t) {
    float* a = acc + t * LT;
    std::fill(a, a + LT, 0.0f);
    for (size_t i = 0; i < K; ++i) {
      const float wi = wts[t * K + i];
      const float* hi = slots + (t * K + i) * LT;
      for (size_t j = 0; j < LT; ++j) a[j] = a[j] + wi * hi[j];
    }
    ops::rms_norm(a, w.latent_norm.data(), LT, cfg.rms_eps, a);
  }
  ops::matmul(w.latent_up, acc, T, out, pool);
  for (size_t i = 0; i < T * H; ++i) out[i] = out[i] + sh[i];
  return {};
}

}  // namespace deltafin::layers
