// The MoE (docs/design/engine.md): route every row, fetch the union of the
// block's experts once, run each expert on all rows routed to it, sum each
// row's experts in route order; K3's latent MoE then applies the latent norm,
// the up-projection and adds the fused shared experts, Qwen3's is done.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec.h"
#include "model/layers.h"
#include "model/matrix_ops.h"

namespace deltafin::layers {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The block's experts ascending, and for each the route slots (t * top_k + i)
// that chose it, ascending: a counting sort of the routes.
void build_union(const std::vector<int>& ids, size_t E, Workspace& ws) {
  auto& count = ws.expert_count;
  count.assign(E, 0);
  for (int e : ids) ++count[size_t(e)];
  ws.union_ids.clear();
  ws.slot_start.clear();
  int at = 0;
  for (size_t e = 0; e < E; ++e) {
    if (!count[e]) continue;
    ws.union_ids.push_back(int(e));
    ws.slot_start.push_back(at);
    const int n = count[e];
    count[e] = at;  // now: the next free place of expert e's slots
    at += n;
  }
  ws.slot_start.push_back(at);
  ws.slot_list.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ws.slot_list[size_t(count[size_t(ids[i])]++)] = int(i);
}

kernels::MatmulJob expert_job(ExpertFormat f, const ExpertMatrix& m, size_t rows, float* Y) {
  using kernels::WeightFormat;
  switch (f) {
    case ExpertFormat::Mxfp4: return {WeightFormat::kMxfp4, m.packed, m.scales, rows, Y};
    case ExpertFormat::Bf16: return {WeightFormat::kBf16, m.packed, nullptr, rows, Y};
    case ExpertFormat::Fp8Block: return {WeightFormat::kFp8Block, m.packed, m.scales, rows, Y};
  }
  return {};
}

// One routed expert over the rows routed to it: gathers their inputs (latents
// or hidden rows), runs W2 · act(W1 x, W3 x), and writes each row's result
// into its route slot. `pool` splits each product when one expert is all a
// thread pool has to do.
void run_expert(const ModelConfig& cfg, const ExpertWeights& ew, std::span<const int> slots, const float* lat,
                float* route_out, ThreadScratch& ts, ThreadPool* pool) {
  const size_t K = cfg.moe.top_k, LT = size_t(cfg.expert_in()), I = cfg.moe.expert_inter, n = slots.size();
  float* xe = ts.expert_in.take(n * LT);
  float* h1 = ts.expert_gate.take(n * I);
  float* h3 = ts.expert_up.take(n * I);
  float* he = ts.expert_out.take(n * LT);
  for (size_t r = 0; r < n; ++r) {
    const size_t row = size_t(slots[r]) / K;
    std::copy(lat + row * LT, lat + (row + 1) * LT, xe + r * LT);
  }
  const ExpertFormat f = cfg.moe.format;
  const kernels::MatmulJob up[] = {expert_job(f, ew.w1, I, h1), expert_job(f, ew.w3, I, h3)};
  kernels::matmul_group(up, 2, LT, xe, n, pool);
  if (cfg.activation == Activation::SiTU)
    ops::situ_rows(h1, h3, n * I, cfg.situ_beta, cfg.situ_linear_beta, h1);
  else
    ops::silu_glu_rows(h1, h3, n * I, h1);
  const kernels::MatmulJob down = expert_job(f, ew.w2, LT, he);
  kernels::matmul_group(&down, 1, I, h1, n, pool);
  for (size_t r = 0; r < n; ++r) std::copy(he + r * LT, he + (r + 1) * LT, route_out + size_t(slots[r]) * LT);
}

// Hands out a tile's experts to the computing threads, each exactly once:
// the first one that is ready (no wait: a RAM tier hit, a read already in)
// among the next kLookahead not yet taken in request order, else the
// earliest not yet taken (reads finish roughly in request order). So the
// threads compute the tier's hits while the misses are still read, where
// request order had them wait on a miss with hits behind it. Each expert
// writes only its own route slots, so the order cannot change a value.
class ExpertPicker {
 public:
  ExpertPicker(const ExpertSource& src, std::vector<uint8_t>& claimed, size_t n) : src_(src), claimed_(claimed), n_(n) {
    claimed_.assign(n, 0);  // no allocation once the workspace has held a tile this large
  }
  // The next expert to compute, n when none is left.
  size_t next() {
    size_t lo = cursor_.load(std::memory_order_relaxed);
    while (lo < n_ && taken(lo)) ++lo;
    cursor_.store(lo, std::memory_order_relaxed);  // a hint: a stale value only makes a scan longer
    const size_t end = std::min(n_, lo + kLookahead);
    for (size_t u = lo; u < end; ++u)
      if (!taken(u) && src_.ready(u) && take(u)) return u;
    for (size_t u = lo; u < n_; ++u)
      if (take(u)) return u;
    return n_;
  }

 private:
  static constexpr size_t kLookahead = 64;
  bool taken(size_t u) { return std::atomic_ref<uint8_t>(claimed_[u]).load(std::memory_order_relaxed) != 0; }
  bool take(size_t u) { return std::atomic_ref<uint8_t>(claimed_[u]).exchange(1, std::memory_order_acq_rel) == 0; }
  const ExpertSource& src_;
  std::vector<uint8_t>& claimed_;
  const size_t n_;
  std::atomic<size_t> cursor_{0};
};

// Computes the experts of one begin() (union members [first, first + n), views
// in ws.expert_views) as each becomes ready, while later ones are still
// arriving. Each thread takes whole experts as it frees up (ExpertPicker:
// ready ones first), so small products do not pay a hand-off each and no
// thread waits on a late half while the other has nothing left; with fewer
// experts than threads each product is split over the threads instead.
// Returns the compute's idle time waiting for experts (per pool thread when
// parallel).
struct TileTimes {
  double waited = 0;    // per pool thread
  double products = 0;  // summed over threads
};
Result<TileTimes> compute_tile(const ModelConfig& cfg, ExpertSource& src, size_t first, size_t n, const float* lat,
                               float* route_out, Workspace& ws, ThreadPool* pool) {
  auto slots_of = [&](size_t u) {
    const size_t a = size_t(ws.slot_start[first + u]), b = size_t(ws.slot_start[first + u + 1]);
    return std::span<const int>(ws.slot_list.data() + a, b - a);
  };
  const size_t P = size_t(pool->size());
  ExpertPicker picker(src, ws.expert_claimed, n);
  TileTimes times;
  if (P == 1 || n < P) {
    for (size_t u = picker.next(); u < n; u = picker.next()) {
      const auto w0 = Clock::now();
      DF_TRY(src.wait(u));
      const auto c0 = Clock::now();
      times.waited += std::chrono::duration<double>(c0 - w0).count();
      run_expert(cfg, ws.expert_views[u], slots_of(u), lat, route_out, ws.threads[0], pool);
      times.products += since(c0) * double(P);
    }
    return times;
  }
  std::mutex mu;
  Status failed;
  pool->parallel_for(P, 1, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      double my_wait = 0, my_products = 0;
      Status my_status;
      for (size_t u = picker.next(); u < n && my_status.ok(); u = picker.next()) {
        const auto w0 = Clock::now();
        my_status = src.wait(u);
        const auto c0 = Clock::now();
        my_wait += std::chrono::duration<double>(c0 - w0).count();
        if (!my_status.ok()) break;
        run_expert(cfg, ws.expert_views[u], slots_of(u), lat, route_out, ws.threads[i], nullptr);
        my_products += since(c0);
      }
      std::lock_guard<std::mutex> lock(mu);
      times.waited += my_wait / double(P);
      times.products += my_products;
      if (failed.ok() && !my_status.ok()) failed = my_status;
    }
  });
  DF_TRY(failed);
  return times;
}

}  // namespace

void route(const float* logits, const float* bias, int E, int k, int* experts, float* weights, ThreadScratch& ts) {
  // Selection uses sigmoid + bias; ties go to the lower id.
  auto& order = ts.route_order;
  auto& score = ts.route_score;
  auto& choice = ts.route_choice;
  order.resize(size_t(E));
  score.resize(size_t(E));
  choice.resize(size_t(E));
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

void route(const float* logits, const float* bias, int E, int k, int* experts, float* weights) {
  ThreadScratch ts;
  route(logits, bias, E, k, experts, weights, ts);
}

void route_softmax(const float* logits, int E, int k, bool renormalize, int* experts, float* weights,
                   ThreadScratch& ts) {
  // Probabilities over all experts (max-subtracted exp, summed in id order),
  // the top k by probability (ties to the lower id), optionally renormalised.
  auto& order = ts.route_order;
  auto& prob = ts.route_score;
  order.resize(size_t(E));
  prob.assign(logits, logits + E);
  const float total = ops::softmax_exp(prob.data(), size_t(E));
  for (int e = 0; e < E; ++e) prob[size_t(e)] = prob[size_t(e)] / total;
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return prob[size_t(a)] > prob[size_t(b)] || (prob[size_t(a)] == prob[size_t(b)] && a < b); });
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum = sum + prob[size_t(order[size_t(i)])];
  for (int i = 0; i < k; ++i) {
    experts[i] = order[size_t(i)];
    weights[i] = renormalize ? prob[size_t(order[size_t(i)])] / sum : prob[size_t(order[size_t(i)])];
  }
}

Status moe(const ModelConfig& cfg, const LayerWeights& w, int layer, ExpertSource& src, const float* x, size_t T,
           float* out, Workspace& ws, ThreadPool* pool, MoeStats* stats, const RouteObserver& observer,
           int64_t start_pos, NextLayerGuesser* guesser) {
  const auto& m = cfg.moe;
  const size_t H = cfg.hidden, E = m.num_experts, K = m.top_k, LT = size_t(cfg.expert_in()), P = size_t(pool->size());
  const bool latent = m.latent > 0, shared_experts = m.num_shared > 0;
  float* logits = ws.router_logits.take(T * E);
  float* route_out = ws.route_out.take(T * K * LT);
  const float* lat = x;  // the experts' input rows: the latent, or x itself
  if (latent) {
    float* l = ws.latent_in.take(T * LT);
    ops::matmul_group({{&w.router, logits}, {&w.latent_down, l}}, x, T, pool);
    lat = l;
  } else {
    ops::matmul(w.router, x, T, logits, pool);
  }

  auto& ids = ws.route_ids;
  auto& wts = ws.route_weights;
  ids.resize(T * K);
  wts.resize(T * K);
  pool->parallel_for(P, 1, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      const auto [t0, t1] = share(T, i, P);
      for (size_t t = t0; t < t1; ++t) {
        if (m.router.kind == RouterKind::Softmax)
          route_softmax(logits + t * E, int(E), int(K), m.router.renormalize, ids.data() + t * K, wts.data() + t * K,
                        ws.threads[i]);
        else
          route(logits + t * E, w.correction_bias.data(), int(E), int(K), ids.data() + t * K, wts.data() + t * K,
                ws.threads[i]);
      }
    }
  });
  if (observer) observer(start_pos, layer, T, int(K), std::span<const int>(ids.data(), T * K));
  build_union(ids, E, ws);
  const size_t U = ws.union_ids.size();

  // A union larger than the source holds at once (a long prefill block of a
  // model with large experts) is fetched in tiles, one after the other: each
  // expert is still read once per layer per block.
  const size_t cap = std::max<size_t>(1, std::min(U, src.max_batch()));
  ws.expert_views.resize(cap);
  float* shared = ws.shared_out.take(T * H);
  double waited = 0;
  for (size_t first = 0; first < U; first += cap) {
    const size_t n = std::min(cap, U - first);
    const auto t0 = Clock::now();
    DF_TRY(src.begin(layer, std::span<const int>(ws.union_ids.data() + first, n),
                     std::span<ExpertWeights>(ws.expert_views.data(), n)));
    waited += since(t0);
    if (first == 0 && shared_experts) {
      // The fused shared experts need no routed expert: compute them while the reads are in flight.
      const auto s0 = Clock::now();
      gated_mlp(cfg, w.shared_gate, w.shared_up, w.shared_down, x, T, shared, ws, pool);
      if (guesser) guesser->guess(shared, T);
      if (stats) stats->seconds_shared += since(s0);
    }
    DF_ASSIGN(const TileTimes tile, compute_tile(cfg, src, first, n, lat, route_out, ws, pool));
    waited += tile.waited;
    if (stats) stats->seconds_products += tile.products;
  }
  if (stats) {
    stats->seconds_acquire += waited;
    stats->experts += U;
    stats->bytes += U * cfg.expert_bytes();
  }

  // Combine in route order: acc = acc + (w_i * h_i), then (latent MoE) the
  // latent norm and the up-projection.
  float* acc = latent ? ws.latent_sum.take(T * LT) : out;
  pool->parallel_for(T, 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* a = acc + t * LT;
      std::fill(a, a + LT, 0.0f);
      for (size_t i = 0; i < K; ++i) kernels::axpy(wts[t * K + i], route_out + (t * K + i) * LT, a, LT);
      if (latent) ops::rms_norm(a, w.latent_norm.data(), LT, cfg.rms_eps, a);
    }
  });
  if (latent) ops::matmul(w.latent_up, acc, T, out, pool);
  if (shared_experts) kernels::add(shared, out, T * H);
  return {};
}

}  // namespace deltafin::layers
