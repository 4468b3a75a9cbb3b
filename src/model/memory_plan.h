// What a model needs in memory: the resident spine, routed expert bytes (per
// cold token and in total), per-sequence KDA state, the MLA latent cache and
// the KV cache of GQA layers.
// From the config alone (arithmetic) or measured over an opened checkpoint.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "model/config.h"

namespace deltafin {

struct MemoryPlan {
  // Checkpoint facts (zero when planned from the config alone).
  uint64_t shards = 0;
  uint64_t tensors = 0;
  uint64_t largest_file_offset = 0;  // end of the furthest tensor in any shard
  uint64_t spine_bytes = 0;          // every non-expert tensor, as stored

  int moe_layers = 0;
  int experts_per_layer = 0;
  int top_k = 0;
  uint64_t experts_total = 0;                // moe_layers x experts_per_layer
  uint64_t expert_bytes = 0;                 // one routed expert in its format (with scales)
  uint64_t expert_bytes_per_cold_token = 0;  // top_k x moe_layers x expert_bytes
  uint64_t routed_expert_bytes = 0;          // experts_total x expert_bytes

  int kda_layers = 0;
  uint64_t kda_state_bytes_per_layer = 0;  // heads·d·d·4 + 3·channels·kernel·4
  uint64_t kda_state_bytes = 0;            // per sequence, independent of context
  int mla_layers = 0;
  uint64_t mla_cache_bytes_per_token = 0;  // mla_layers x (kv_lora + rope) x 4
  int gqa_layers = 0;
  uint64_t kv_cache_bytes_per_token = 0;   // gqa_layers x 2 (keys, values) x kv_heads x head_dim x 4
  // Every cache the context grows, per token.
  uint64_t cache_bytes_per_token() const { return mla_cache_bytes_per_token + kv_cache_bytes_per_token; }

  nlohmann::ordered_json to_json() const;
};

// The arithmetic from the config (no checkpoint facts).
MemoryPlan plan_from_config(const ModelConfig& cfg);

// The plan plus facts measured over the checkpoint's headers: shard and tensor
// counts, largest offset and spine bytes (tensors outside the routed experts).
MemoryPlan plan_memory(const Checkpoint& ck, const ModelConfig& cfg);

// True for a routed expert tensor name (K3 "...block_sparse_moe.experts.{e}.",
// the Hub's MoE families "...mlp.experts.{e}.").
bool is_routed_expert_tensor(std::string_view name);

}  // namespace deltafin
