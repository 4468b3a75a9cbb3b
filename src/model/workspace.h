// Every buffer forward(rows) uses, named for what it holds. Buffers grow to
// the largest block seen and are reused, so the steady-state hot path does
// not allocate. Shapes use T = rows in the block, H = hidden; "per thread"
// parts are indexed by the pool thread that uses them.
#pragma once
#include <cstddef>
#include <vector>

#include "model/expert_source.h"

namespace deltafin {

// A float buffer that grows on demand (never shrinks).
class Buffer {
 public:
  float* take(size_t n) {
    if (v_.size() < n) v_.resize(n);
    return v_.data();
  }

 private:
  std::vector<float> v_;
};

// Scratch one pool thread owns while it runs its part of a layer.
struct ThreadScratch {
  Buffer mix, key;                      // one row's AttnRes depth mix and its current-value key [H]
  Buffer decay, u;                      // KDA: a head's decay factors and prediction [head_dim]
  Buffer state;                         // KDA verify: a head's state while the block runs on a copy
  Buffer kv_row;                        // MLA: one kv_b row widened to fp32 [kv_lora]
  Buffer scores_latent, scores_rope;    // MLA: one cache chunk's score blocks
  Buffer value_in, value_out;           // MLA: a head's attended latents [T][kv_lora] / values [T][v]
  Buffer expert_in, expert_gate, expert_up, expert_out;  // MoE: one expert's rows
  Buffer gqa_scores;                    // GQA: one (row, head)'s softmax numerators [positions]
  std::vector<int> route_order;         // MoE routing: expert order [experts]
  std::vector<float> route_score, route_choice;          // [experts]
};

struct Workspace {
  // Residual stream and Block AttnRes.
  Buffer partial;          // the current block's partial sum p [T][H]
  Buffer block_in;         // normed input of the attention or FFN block [T][H]
  Buffer attn_out;         // [T][H]
  Buffer ffn_out;          // [T][H]
  Buffer anchor_values;    // finished blocks' sums [T][max_anchors][H]
  Buffer anchor_keys;      // their RMS0-normalised keys [T][max_anchors][H]

  // KDA ([T][channels] unless noted).
  Buffer kda_q, kda_k, kda_v;          // projections (the conv inputs)
  Buffer kda_cq, kda_ck, kda_cv;       // conv outputs (q, k normalised in place)
  Buffer kda_gate, kda_decay_in;       // output gate logits; decay logits (f_b · f_a · x)
  Buffer kda_decay_low;                // f_a · x [T][head_dim]
  Buffer kda_beta;                     // [T][heads]
  Buffer kda_y;                        // per-head outputs, normed and gated

  // MLA.
  Buffer mla_cq;          // q_a · x, normed [T][q_lora]
  Buffer mla_q;           // [T][heads][qk_head_dim]
  Buffer mla_kv;          // kv_a · x [T][kv_lora + rope]
  Buffer mla_gate;        // [T][heads * v]
  Buffer mla_q_latent;    // absorbed queries [T][heads][kv_lora]
  Buffer mla_q_rope;      // [T][heads][rope]
  Buffer mla_scores;      // softmax numerators [rows][heads][positions]
  Buffer mla_sums;        // their sums [rows][heads]
  Buffer mla_attended;    // attention-weighted latents [heads][T][kv_lora]
  Buffer mla_out;         // gated head outputs [T][heads * v]

  // GQA.
  Buffer gqa_q, gqa_k, gqa_v;   // projections [T][heads or kv_heads][head_dim]
  Buffer gqa_rope;              // cos then sin per row [T][2][head_dim / 2]
  Buffer gqa_out;               // attended heads [T][heads * head_dim]

  // FFN and MoE.
  Buffer ffn_gate, ffn_up;   // dense / shared-expert intermediate [T][inter]
  Buffer router_logits;      // [T][experts]
  Buffer latent_in;          // latent_down · x [T][latent]
  Buffer route_out;          // each (row, route slot)'s expert output [T][top_k][latent]
  Buffer latent_sum;         // the route-order sum, then normed [T][latent]
  Buffer shared_out;         // fused shared experts [T][H]
  Buffer guess_in, guess_logits;  // next layer's guessed router input [T][H] and logits [T][experts]
  std::vector<int> route_ids;        // [T][top_k]
  std::vector<float> route_weights;  // [T][top_k]
  std::vector<int> union_ids;        // the block's experts, ascending
  std::vector<int> slot_start;       // union member u's route slots: slot_list[slot_start[u] .. slot_start[u+1])
  std::vector<int> slot_list;        // route slots (t * top_k + i), grouped by expert, ascending
  std::vector<int> expert_count;     // [experts]
  std::vector<ExpertWeights> expert_views;
  std::vector<uint8_t> expert_claimed;  // a tile's experts a thread took (std::atomic_ref), [tile]
  std::vector<int> guess_ids;

  std::vector<ThreadScratch> threads;  // [pool size]
};

}  // namespace deltafin
