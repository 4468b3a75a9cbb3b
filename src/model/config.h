// The architecture as data: each supported model family (src/model/families/)
// maps its published config.json onto these block choices, and K3 is one
// configuration of them. Parsed and validated by ModelConfig::from_json.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deltafin {

enum class Family { KimiK3, Qwen3Moe, Qwen3 };
enum class AttentionKind { KDA, MLA, GQA };
enum class FfnKind { Dense, MoE };
// How layers add into the residual stream: Block AttnRes (K3: depth mixes
// over finished blocks' sums) or the plain running sum.
enum class ResidualKind { AttnRes, Plain };
// The gated MLP's activation: K3's SiTU, or SiLU(gate) * up.
enum class Activation { SiTU, SiluGlu };
// Routed experts' weight format on disk (and in the kernels).
enum class ExpertFormat { Mxfp4, Bf16, Fp8Block };

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

// Grouped-query attention with RoPE (rotate-half pairs) and optional per-head
// RMS norms of q and k before the rotation (Qwen3).
struct GqaConfig {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  double rope_theta = 0;
  bool qk_norm = false;
  // Per rotated pair i < head_dim/2: the angle's frequency, theta^(-2i/d)
  // or YaRN's blend of it with theta^(-2i/d) / factor; cos and sin are
  // scaled by attention_factor (1 without YaRN). Set by the family parser.
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
};

// Which experts a row goes to and with what weights.
enum class RouterKind {
  SigmoidBias,  // K3: top-k of sigmoid(logit) + correction bias; weights the unbiased scores
  Softmax,      // Qwen3: top-k of softmax(logits); weights the probabilities
};
struct RouterSpec {
  RouterKind kind = RouterKind::SigmoidBias;
  bool renormalize = true;  // weights divided by their sum over the k chosen
};

struct MoeConfig {
  int num_experts = 0;
  int top_k = 0;
  int num_shared = 0;
  int expert_inter = 0;   // moe_intermediate_size
  int latent = 0;         // routed_expert_hidden_size; 0: experts read the hidden state itself
  RouterSpec router;
  ExpertFormat format = ExpertFormat::Mxfp4;
  int shared_inter() const { return num_shared * expert_inter; }
};

struct ModelConfig {
  Family family = Family::KimiK3;
  std::string model_type;       // as config.json spells it
  ResidualKind residual = ResidualKind::AttnRes;
  Activation activation = Activation::SiTU;
  bool tied_embeddings = false;  // the LM head is the embedding matrix
  bool fp8_spine = false;        // attention and dense MLP matrices are FP8 blocks
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
  GqaConfig gqa;
  MoeConfig moe;
  int bos_id = -1, eos_id = -1, pad_id = -1;
  bool is_k3_full = false;  // every value equals the released K3 config

  // Dispatches on model_type to the family's parser (src/model/families/).
  static Result<ModelConfig> from_json(const nlohmann::json& root);

  int num_kda_layers() const;
  int num_mla_layers() const;
  int num_moe_layers() const;
  int num_gqa_layers() const;
  // Width of the rows routed experts multiply: the latent, or the hidden size.
  int expert_in() const { return moe.latent > 0 ? moe.latent : hidden; }
  // Bytes of one routed expert's three matrices in its format (with scales).
  uint64_t expert_bytes() const;
};

}  // namespace deltafin
