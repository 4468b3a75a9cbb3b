// The per-layer blocks of forward(rows). Each takes T input rows [T][hidden]
// and writes T output rows [T][hidden]; recurrent and cached state lives in
// the session, scratch in the Workspace. Internal to src/model.
#pragma once
#include <span>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "model/config.h"
#include "model/expert_source.h"
#include "model/model.h"
#include "model/session.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace deltafin::layers {

// Part `i` of [0, n) split into `parts` contiguous ranges.
inline std::pair<size_t, size_t> share(size_t n, size_t i, size_t parts) {
  const size_t per = n / parts, extra = n % parts;
  const size_t b = i * per + std::min(i, extra);
  return {b, b + per + (i < extra ? 1 : 0)};
}

// ---- KDA (src/model/kda.cpp).
// A verification block leaves the session's KDA state as it was and keeps
// what committing a prefix of its rows needs: the rows' projections before
// the conv and the decay and beta logits (not the projections' inputs: they
// are not run again). 4 x channels + heads floats per row and KDA layer.
struct KdaRecord {
  size_t rows = 0;
  std::vector<float> q, k, v;  // conv inputs [rows][channels]
  std::vector<float> decay_in; // [rows][channels]
  std::vector<float> beta;     // [rows][heads]
};
void kda(const ModelConfig& cfg, const LayerWeights& w, KdaLayerState& st, const float* x, size_t T, float* out,
         Workspace& ws, ThreadPool* pool, KdaRecord* record = nullptr);
// Advances `st` by the first n rows of a verification block, bit for bit as
// if they had been run as an ordinary block.
void kda_commit(const ModelConfig& cfg, const LayerWeights& w, KdaLayerState& st, const KdaRecord& rec, size_t n,
                Workspace& ws, ThreadPool* pool);

// ---- MLA (src/model/mla.cpp). Appends the T rows' latents to the cache
// (positions cache.length()..), then each row attends causally over it.
void mla(const ModelConfig& cfg, const LayerWeights& w, MlaLayerCache& cache, const float* x, size_t T, float* out,
         Workspace& ws, ThreadPool* pool);

// ---- GQA (src/model/gqa.cpp). Appends the T rows' rotated keys and values
// to the cache (positions cache.length()..), then each row attends causally.
void gqa(const ModelConfig& cfg, const LayerWeights& w, KvLayerCache& cache, const float* x, size_t T, float* out,
         Workspace& ws, ThreadPool* pool);

// ---- FFN (src/model/ffn.cpp). out = down · act(gate · x, up · x), act the
// model's (SiTU or SiLU-GLU).
void gated_mlp(const ModelConfig& cfg, const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
              size_t T, float* out, Workspace& ws, ThreadPool* pool);

// ---- MoE (src/model/moe.cpp): latent (K3) or on the hidden state (Qwen3).
struct MoeStats {
  uint64_t experts = 0, bytes = 0;
  double seconds_acquire = 0;  // compute idle waiting for experts (begin + waits; per pool thread when parallel)
  double seconds_products = 0; // routed experts' products, summed over threads
  double seconds_shared = 0;   // the fused shared experts (and the next layer's guess)
};

// Guesses the next MoE layer's experts once this layer's shared experts are
// known, and hands them to ExpertSource::prefetch (Model::set_prefetch).
class NextLayerGuesser {
 public:
  virtual ~NextLayerGuesser() = default;
  // `shared` is this layer's shared-expert output [T][hidden].
  virtual void guess(const float* shared, size_t T) = 0;
};
// Blocks with more rows route to most experts anyway: no guess there.
inline constexpr size_t kPrefetchMaxRows = 8;

// `observer` (may be empty) sees the block's routes; start_pos is the first
// row's position; `guesser` may be null.
Status moe(const ModelConfig& cfg, const LayerWeights& w, int layer, ExpertSource& src, const float* x, size_t T,
           float* out, Workspace& ws, ThreadPool* pool, MoeStats* stats, const RouteObserver& observer,
           int64_t start_pos, NextLayerGuesser* guesser);

// Softmax routing (Qwen3): the top-k experts by softmax probability, ties to
// the lower id; weights the probabilities, renormalised over the k if asked.
void route_softmax(const float* router_logits, int num_experts, int top_k, bool renormalize, int* experts,
                   float* weights, ThreadScratch& scratch);

// Route selection for one row: the top-k experts by sigmoid(logit) + bias,
// descending, ties to the lower id; weights are the unbiased sigmoid scores
// renormalised in route order. The scratch overload does not allocate.
void route(const float* router_logits, const float* bias, int num_experts, int top_k, int* experts, float* weights,
           ThreadScratch& scratch);
void route(const float* router_logits, const float* bias, int num_experts, int top_k, int* experts, float* weights);

}  // namespace deltafin::layers
