// The architecture as data: K3 is one configuration of these blocks. Parsed
// from a published config.json (root + text_config) and validated.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deltafin {

enum class AttentionKind { KDA, MLA };
enum class FfnKind { Dense, MoE };

struct KdaConfig {
  int heads = 0;
  int head_dim = 0;      // K = V
  int conv_kernel = 0;   // short causal conv width
  float gate_lower_bound = 0;
  int channels() const { return heads * head_dim; }
};

struct MlaConfig {
  int heads = 0;
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;
  int v_head_dim = 0;
  int qk_head_dim() const { return qk_nope_dim + qk_rope_dim; }
};

struct MoeConfig {
  int num_experts = 0;
  int top_k = 0;
  int num_shared = 0;
  int expert_inter = 0;   // moe_intermediate_size
  int latent = 0;         // routed_expert_hidden_size
  int shared_inter() const { return num_shared * expert_inter; }
};

struct ModelConfig {
  int hidden = 0;
  int num_layers = 0;
  int vocab = 0;
  int dense_inter = 0;
  float rms_eps = 0;
  float situ_beta = 0;         // gate-side bound
  float situ_linear_beta = 0;  // up-side bound
  int attn_res_block = 0;      // layers per AttnRes block
  std::vector<AttentionKind> attention;  // per layer
  std::vector<FfnKind> ffn;              // per layer
  KdaConfig kda;
  MlaConfig mla;
  MoeConfig moe;
  int bos_id = -1, eos_id = -1, pad_id = -1;
  bool is_k3_full = false;  // every value equals the released K3 config

  static Result<ModelConfig> from_json(const nlohmann::json& root);

  int num_kda_layers() const;
  int num_mla_layers() const;
  int num_moe_layers() const;
  // Bytes of one routed expert in MXFP4 (w1, w2, w3 packed + scales).
  uint64_t expert_bytes() const;
};

}  // namespace deltafin
