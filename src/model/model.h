// The target model: config + bound spine weights + an ExpertSource, and the
// one primitive every path uses: forward(rows).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/expert_source.h"
#include "model/guess_depth.h"
#include "model/session.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace deltafin::layers {
struct KdaRecord;
}

namespace deltafin {

struct ForwardStats {
  double seconds_kda = 0, seconds_mla = 0, seconds_dense = 0, seconds_moe = 0, seconds_head = 0;
  double seconds_expert_wait = 0;  // compute idle waiting for experts (ExpertSource begin/wait)
  // Routed experts' products (gather, W1/W3, SiTU, W2, scatter), summed over
  // the threads that ran them, and the shared experts' wall time.
  double seconds_expert_products = 0, seconds_shared = 0;
  uint64_t rows = 0;
  uint64_t expert_bytes = 0;       // routed expert bytes used (union per layer per block)
  uint64_t experts_used = 0;
};

enum class Logits { LastRow, AllRows, None };

// Sees each MoE layer's routing: `ids` holds rows x top_k expert ids in route
// order for the rows at positions first_position.. (route traces, statistics).
using RouteObserver =
    std::function<void(int64_t first_position, int layer, size_t rows, int top_k, std::span<const int> ids)>;

// Sees each next-layer guess (set_prefetch): the experts read ahead for MoE
// layer `layer`, for the block of `rows` rows starting at first_position.
using GuessObserver = std::function<void(int64_t first_position, int layer, size_t rows, std::span<const int> guess)>;

class Model {
 public:
  // Opens a checkpoint directory (published layout) with experts read in place.
  static Result<std::unique_ptr<Model>> open(const std::string& dir, int threads);
  // Uses another source of experts (e.g. the streaming store).
  static Result<std::unique_ptr<Model>> open_with(std::unique_ptr<Checkpoint> spine, std::unique_ptr<ExpertSource> experts,
                                                  int threads);

  const ModelConfig& config() const { return cfg_; }
  const Checkpoint& checkpoint() const { return *ck_; }
  // Spine matrices stored row-int8 (lossy); 0 for a weight-exact spine.
  size_t int8_matrices() const { return w_.int8_matrices; }
  Session new_session() const { return Session::create(cfg_); }

  // forward(rows): runs `tokens` at positions session.length .. +T-1 layer by
  // layer (in an MoE layer each expert of the rows' union is acquired once and
  // multiplies all rows routed to it), appends them to the session, and writes
  // fp32 logits: [vocab] for LastRow, [T][vocab] for AllRows. A row's values do
  // not depend on T, on the other rows, or on the thread count. On error the
  // session is in an unspecified state: restore it from a snapshot (a copy).
  Status forward(std::span<const int32_t> tokens, Session& session, Logits which, std::vector<float>* logits,
                 ForwardStats* stats = nullptr);

  // Verification of a draft block [pending, d1..dk]: the rows run as in
  // forward(.., Logits::AllRows, ..) (same logits, bit for bit), but the
  // session is not advanced: KDA state is left as it was (the block keeps
  // what a replay needs) and the MLA caches hold the rows as uncommitted.
  // commit_verified(session, n) then makes the block's first n rows part of
  // the session, exactly as if forward() had run those n rows; it must follow
  // verify() on the same session before any other call that uses it.
  Status verify(std::span<const int32_t> tokens, Session& session, std::vector<float>* logits,
                ForwardStats* stats = nullptr);
  Status commit_verified(Session& session, size_t n);
  // Extra memory a verification block keeps per row until its commit.
  uint64_t verify_bytes_per_row() const;

  // Hidden-row capture for block drafters (DSpark reads the target's rows):
  // after each listed layer, every forward() or verify() block copies its
  // rows' AttnRes partial sum (p once the layer's FFN output is added) into
  // a buffer [T][layers.size()][hidden] fp32, valid until the next block.
  // An empty list turns it off. Capturing never changes a logit.
  Status set_capture_layers(std::vector<int> layers);
  std::span<const float> captured_rows() const { return captured_; }
  size_t captured_layer_count() const { return capture_layers_.size(); }
  // The bound spine (a block drafter uses the target's embedding and LM head).
  const ModelWeights& weights() const { return w_; }

  ExpertSource& experts() { return *experts_; }
  void set_route_observer(RouteObserver observer) { route_observer_ = std::move(observer); }
  void set_guess_observer(GuessObserver observer) { guess_observer_ = std::move(observer); }
  // Speculative expert prefetch: in each MoE layer, for blocks of at most
  // layers::kPrefetchMaxRows rows, the next MoE layer's router is applied to
  // the state known once this layer's shared experts have run (through the
  // next layer's AttnRes query and norm) and its top `per_row` experts per
  // row are handed to ExpertSource::prefetch while this layer computes. A guess only moves
  // reads earlier: every expert used is still the one the real router picks,
  // so tokens and logits are unchanged. 0 turns it off.
  void set_prefetch(int per_row);
  // The same, with the guesses per row learned per layer (GuessDepth): up to
  // `max_per_row`, as many as there are ranks whose guesses were routed at
  // least `min_precision` of the time lately; 4 per row until a layer is scored.
  void set_prefetch_auto(int max_per_row, double min_precision);
  // Next-layer guesses so far: the rows guessed for, and the guesses per row
  // read ahead summed over those rows.
  struct GuessStats {
    uint64_t rows = 0, per_row_sum = 0;
  };
  GuessStats guess_stats() const { return guess_stats_; }
  // Cancellation: while `flag` is set, forward() returns Status::cancelled()
  // before its next layer (the session is then unspecified, as on any error).
  // nullptr (the default) never cancels. The flag must outlive its use.
  void set_cancel_flag(const std::atomic<bool>* flag) { cancel_ = flag; }

 private:
  Model();
  std::unique_ptr<Checkpoint> ck_;
  ModelConfig cfg_;
  ModelWeights w_;
  std::unique_ptr<ExpertSource> experts_;
  std::unique_ptr<ThreadPool> pool_;
  RouteObserver route_observer_;
  GuessObserver guess_observer_;
  int prefetch_per_row_ = 0;  // the fixed count, or auto's cap (> 0: guesses are made)
  std::unique_ptr<GuessDepth> guess_depth_;  // set_prefetch_auto; null for a fixed count
  // Per MoE layer: the ranked guesses made for its next block, scored against
  // its routes once it has run (auto only).
  struct PendingGuess {
    int64_t first_position = -1;
    size_t rows = 0;
    int ranks = 0;
    std::vector<int> ranked;  // [rows][ranks]
  };
  std::vector<PendingGuess> pending_guess_;
  GuessStats guess_stats_;
  void score_guess(int layer, int64_t first_position, size_t T);
  const std::atomic<bool>* cancel_ = nullptr;
  std::vector<int> next_moe_;  // per layer: the next MoE layer after it, or -1
  // AttnRes pseudo-query folded with its key-norm weight, per layer (c = w ⊙ q).
  std::vector<std::vector<float>> c_attn_, c_mlp_;
  std::vector<float> c_out_;
  std::unique_ptr<Workspace> ws_;
  // The last verify(): its session, its rows, and per KDA layer the replay record.
  const Session* verified_session_ = nullptr;
  size_t verified_rows_ = 0;
  std::vector<layers::KdaRecord> kda_records_;
  std::vector<int> capture_layers_;  // in the order the buffer holds them
  std::vector<int> capture_slot_;    // per layer: its index in capture_layers_, or -1
  std::vector<float> captured_;
  Status run_block(std::span<const int32_t> tokens, Session& session, Logits which, std::vector<float>* logits,
                   ForwardStats* stats, bool verify);
  class Anchors;
  class Guesser;
  void embed(std::span<const int32_t> tokens, float* p) const;
  void attention_input(int layer, Anchors& anchors, float* p, float* x, size_t T);
  void plain_input(const std::vector<float>& norm_weights, const float* p, float* x, size_t T);
  void ffn_input(int layer, const Anchors& anchors, float* p, const float* attn_out, float* x, size_t T);
  void logits_of(const Anchors& anchors, const float* p, size_t first, size_t T, std::vector<float>& logits);

 public:
  ~Model();
};

}  // namespace deltafin
