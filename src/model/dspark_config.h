// DSpark, K3's published block drafter (Inferact/Kimi-K3-DSpark): its
// config.json, parsed and checked against the target it drafts for
// (docs/guide/drafting.md lists the keys and the values K3's release carries).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "model/config.h"

namespace deltafin {

struct DsparkConfig {
  int hidden = 0, num_layers = 0, heads = 0;
  int q_lora_rank = 0, kv_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  int intermediate = 0, vocab = 0;
  float rms_eps = 1e-5f;
  // YaRN rotary (DeepSeek-V3 form).
  double rope_theta = 0, yarn_factor = 1, beta_fast = 32, beta_slow = 1, mscale = 1, mscale_all_dim = 0;
  int64_t original_max_positions = 0;
  std::vector<int> target_layers;  // 0-based target layers whose hidden rows feed the context
  int mask_token_id = -1;
  int block_size = 7;  // query rows per proposal: the anchor and block_size - 1 mask tokens
  int markov_rank = 0;
  bool confidence_head = false, confidence_with_markov = false;

  int qk_head_dim() const { return qk_nope_dim + qk_rope_dim; }

  static Result<DsparkConfig> from_json(const nlohmann::json& j);
  // The drafter fits this target: same hidden width and vocabulary, target
  // layers that exist, a mask id inside the vocabulary.
  Status check_target(const ModelConfig& target) const;
};

// config.json says model_type "k3_dspark".
bool is_dspark_config(const nlohmann::json& j);

}  // namespace deltafin
