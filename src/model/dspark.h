// DSpark's runtime: a 7-row block drafter that reads the target's hidden
// rows (docs/guide/drafting.md, "Drafters"). Shapes: H = hidden, R = kv latent,
// P = rope width, B = block_size (7), L = context length (target positions
// committed so far).
//
// Context ingestion, per committed target position p:
//   hcat = bf16(P_l[p]) for each target layer l           [layers * H]
//   ctx  = RMSNorm(context_proj · hcat, context_norm)      [H]
//   per DSpark layer j: z = kv_a_j · ctx; cache_j gets RMSNorm(z[:R]) and
//   YaRN(z[R:], p)
// Proposal, anchor = the pending token at position L:
//   rows = embed([anchor, MASK x B-1]) at positions L..L+B-1 (the target's
//   embedding), through each layer: input norm, MLA over [cache_j + the B
//   rows' own latents] with no causal mask, post norm, SwiGLU MLP, residual
//   additions carried as in a pre-norm decoder; final norm; the target's LM
//   head; then per row r a Markov bias markov_w2 · markov_w1[prev] (prev =
//   the anchor, then each drafted id) before the argmax.
// Every intermediate is rounded to BF16 as a BF16 PyTorch module would
// (products accumulate in fp32 and round once; RMSNorm takes fp32
// statistics, rounds, then multiplies by the BF16 weight); scores and the
// softmax are fp32, the attention weights rounded to BF16. The independent
// PyTorch version is tools/train/dspark_torch.py.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/thread_pool.h"
#include "model/dspark_config.h"
#include "model/model.h"
#include "model/weights.h"

namespace deltafin {

struct DsparkLayerWeights {
  std::vector<float> input_norm, post_norm, q_a_norm, kv_a_norm;  // BF16 values widened
  Matrix q_a, q_b, kv_a, kv_b, o, gate, up, down;
};

struct DsparkWeights {
  Matrix context_proj;  // [H, layers * H]
  std::vector<float> context_norm, final_norm;
  std::vector<DsparkLayerWeights> layers;
  Matrix markov_w1, markov_w2;  // [vocab, rank] each
  Matrix confidence;            // [1, H (+ rank)]
  float confidence_bias = 0;
};

// Per DSpark layer, per committed target position: the normalised latent
// [R] and the rotated rope key [P] (BF16 values kept as fp32).
struct DsparkCache {
  size_t length = 0;
  std::vector<std::vector<float>> latent, rope;  // [layer][position * R | P]
  void clear(size_t layers);
  uint64_t bytes() const;
};

struct DsparkProposal {
  std::vector<int32_t> ids;       // k drafted ids
  std::vector<float> hidden;      // the final-normed rows [B][H]
  std::vector<float> logits;      // the k rows' logits with the Markov bias [k][vocab]
  std::vector<float> confidence;  // per drafted row (computed; not used by the policy)
};

class Dspark {
 public:
  // Opens a DSpark-layout checkpoint for `target` (whose embedding and LM
  // head it uses; the target must outlive it).
  static Result<std::unique_ptr<Dspark>> open(const std::string& dir, const Model& target, int threads);

  const DsparkConfig& config() const { return cfg_; }
  // Appends positions cache.length .. +n from the target's captured rows
  // [n][target_layers][H] (fp32; rounded to BF16 here).
  void ingest(std::span<const float> hidden, size_t n, DsparkCache& cache);
  // k (<= block_size) ids after `anchor`, the token at position cache.length.
  void propose(int32_t anchor, int k, const DsparkCache& cache, DsparkProposal& out);
  // The YaRN inverse frequencies [P/2] and the softmax scale it implies.
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float attention_scale() const { return scale_; }

 private:
  Dspark() = default;
  DsparkConfig cfg_;
  std::unique_ptr<Checkpoint> ck_;
  DsparkWeights w_;
  const Matrix* embed_ = nullptr;    // the target's
  const Matrix* lm_head_ = nullptr;  // the target's
  std::unique_ptr<ThreadPool> pool_;
  std::vector<float> inv_freq_;
  float scale_ = 0, rope_mscale_ = 1;
  void rotate(float* x, int64_t pos) const;
  void attention(int layer, const float* n, size_t B, int64_t pos0, const DsparkCache& cache, float* out);
};

// fp32 -> the nearest BF16 value, as fp32.
inline float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

}  // namespace deltafin
