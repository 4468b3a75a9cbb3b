#include "model/memory_plan.h"

#include <algorithm>

namespace deltafin {

bool is_routed_expert_tensor(std::string_view name) {
  // K3's and the Hub's MoE families' (Qwen3: model.layers.N.mlp.experts.E...) names.
  return name.find(".block_sparse_moe.experts.") != std::string_view::npos ||
         name.find(".mlp.experts.") != std::string_view::npos;
}

MemoryPlan plan_from_config(const ModelConfig& c) {
  MemoryPlan p;
  p.moe_layers = c.num_moe_layers();
  p.experts_per_layer = c.moe.num_experts;
  p.top_k = c.moe.top_k;
  p.experts_total = uint64_t(p.moe_layers) * uint64_t(p.experts_per_layer);
  p.expert_bytes = c.expert_bytes();
  p.expert_bytes_per_cold_token = uint64_t(c.moe.top_k) * uint64_t(p.moe_layers) * p.expert_bytes;
  p.routed_expert_bytes = p.experts_total * p.expert_bytes;

  const uint64_t heads = uint64_t(c.kda.heads), d = uint64_t(c.kda.head_dim);
  p.kda_layers = c.num_kda_layers();
  p.kda_state_bytes_per_layer = heads * d * d * 4 + 3 * uint64_t(c.kda.channels()) * uint64_t(c.kda.conv_kernel) * 4;
  p.kda_state_bytes = uint64_t(p.kda_layers) * p.kda_state_bytes_per_layer;
  p.mla_layers = c.num_mla_layers();
  p.mla_cache_bytes_per_token = uint64_t(p.mla_layers) * uint64_t(c.mla.kv_lora_rank + c.mla.qk_rope_dim) * 4;
  p.gqa_layers = c.num_gqa_layers();
  p.kv_cache_bytes_per_token = uint64_t(p.gqa_layers) * 2 * uint64_t(c.gqa.kv_dim()) * 4;
  return p;
}

MemoryPlan plan_memory(const Checkpoint& ck, const ModelConfig& c) {
  MemoryPlan p = plan_from_config(c);
  p.shards = ck.shards().size();
  for (const auto& shard : ck.shards()) {
    for (const auto& t : shard->tensors()) {
      p.tensors++;
      p.largest_file_offset = std::max(p.largest_file_offset, t.file_offset + t.nbytes);
      if (!is_routed_expert_tensor(t.name)) p.spine_bytes += t.nbytes;
    }
  }
  return p;
}

nlohmann::ordered_json MemoryPlan::to_json() const {
  return {{"shards", shards},
          {"tensors", tensors},
          {"largest_file_offset", largest_file_offset},
          {"spine_bytes", spine_bytes},
          {"moe_layers", moe_layers},
          {"experts_per_layer", experts_per_layer},
          {"top_k", top_k},
          {"experts_total", experts_total},
          {"expert_bytes", expert_bytes},
          {"expert_bytes_per_cold_token", expert_bytes_per_cold_token},
          {"routed_expert_bytes", routed_expert_bytes},
          {"kda_layers", kda_layers},
          {"kda_state_bytes_per_layer", kda_state_bytes_per_layer},
          {"kda_state_bytes", kda_state_bytes},
          {"mla_layers", mla_layers},
          {"mla_cache_bytes_per_token", mla_cache_bytes_per_token},
          {"gqa_layers", gqa_layers},
          {"kv_cache_bytes_per_token", kv_cache_bytes_per_token}};
}

}  // namespace deltafin
