// The per-layer blocks of forward(rows). Each takes T input rows [T][hidden]
// and writes T output rows [T][hidden]; recurrent/cached state lives in the
// session. Internal to src/model.
#pragma once
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/config.h"
#include "model/expert_source.h"
#include "model/model.h"
#include "model/session.h"
#include "model/weights.h"

namespace deltafin::layers {

// Scratch buffers reused across calls (grown on demand, never shrunk), so the
// steady-state hot path does not allocate.
struct Scratch {
  std::vector<float> a, b, c, d, e, f, g, h;
  std::vector<float> head;  // per-thread / per-head scratch
  static float* take(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

void kda(const ModelConfig& cfg, const LayerWeights& w, KdaLayerState& st, const float* x, size_t T, float* out,
         Scratch& s, ThreadPool* pool);

// Appends the T rows' latents to the cache (positions cache.length..), then
// each row attends causally over the cache.
void mla(const ModelConfig& cfg, const LayerWeights& w, MlaLayerCache& cache, int64_t start_pos, const float* x,
         size_t T, float* out, Scratch& s, ThreadPool* pool);

void dense_ffn(const ModelConfig& cfg, const LayerWeights& w, const float* x, size_t T, float* out, Scratch& s,
               ThreadPool* pool);

struct MoeStats {
  uint64_t experts = 0, bytes = 0;
  double seconds_acquire = 0;  // compute idle waiting for experts (begin + waits; per pool thread when parallel)
};

// The next MoE layer, for guessing its experts (Model::set_prefetch);
// w == nullptr: no guess (the model decides: prefetch on, a next MoE layer,
// at most kPrefetchMaxRows rows).
struct NextLayerGuess {
  const LayerWeights* w = nullptr;
  int layer = -1;
  int per_row = 0;
  // The guessed router input [T][hidden], given the shared experts' output
  // [T][hidden]: input(ctx, shared); set whenever w is. A plain function and
  // context, so the hot path allocates nothing.
  const float* (*input)(void* ctx, const float* shared) = nullptr;
  void* ctx = nullptr;
};
// Blocks with more rows route to most experts anyway: no guess there.
inline constexpr size_t kPrefetchMaxRows = 8;

// `observer` (may be empty) sees the block's routes; start_pos is the first row's position.
Status moe_ffn(const ModelConfig& cfg, const LayerWeights& w, int layer, ExpertSource& src, const float* x, size_t T,
               float* out, Scratch& s, ThreadPool* pool, MoeStats* stats, const RouteObserver& observer,
               int64_t start_pos, const NextLayerGuess& next = {});

// Route selection for one row (exposed for tests): the top-k experts by
// sigmoid(logit) + bias, descending, ties to the lower id; weights are the
// unbiased sigmoid scores renormalised in route order.
void route(const float* router_logits, const float* bias, int num_experts, int top_k, int* experts, float* weights);

}  // namespace deltafin::layers
