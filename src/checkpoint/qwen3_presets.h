// make-model presets for Hugging Face's Qwen3 families in the Hub's published
// layout: Qwen3-MoE ("qwen3_moe", Qwen3MoeForCausalLM) and Qwen3 dense
// ("qwen3", Qwen3ForCausalLM). Tiny presets with seeded random weights (the
// subjects of the PyTorch reference, tools/reference/qwen3_torch.py), a
// Qwen3-235B-A22B routing shape sized to an expert budget, and the released
// configurations as metadata-only (sparse) checkpoints.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deltafin {

struct Qwen3Preset {
  std::string name;
  std::string model_type;  // "qwen3_moe" or "qwen3"
  int hidden = 0, num_layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int inter = 0;            // intermediate_size: the dense MLP (qwen3, and qwen3_moe's mlp_only_layers)
  int moe_inter = 0;        // moe_intermediate_size (qwen3_moe)
  int experts = 0, top_k = 0, decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  bool norm_topk_prob = true, tie_embeddings = false;
  double rope_theta = 1000000.0, rms_norm_eps = 1e-6;
  int64_t max_positions = 4096;
  int max_window_layers = 0;  // the Hub's configs carry it (= num_layers); unused without sliding windows
  int bos_id = 510, eos_id = 511;
  bool fp8 = false;          // --expert-format fp8: every linear but the router and lm_head as E4M3 + 128x128 scales
  bool sparse = false;       // data left as holes (metadata-only checkpoint)
  int shards = 1;
  double experts_gb = 0;     // qwen3-235b-shaped: the expert budget moe_inter was sized from

  bool is_moe() const { return model_type == "qwen3_moe"; }
  // HF's rule (Qwen3MoeDecoderLayer): experts unless the layer is mlp-only or
  // off the sparse step.
  bool is_moe_layer(int layer) const;
};

// The options make-model passes to the qwen3 presets.
struct Qwen3PresetOptions {
  std::string expert_format = "bf16";  // "bf16" or "fp8"
  // > 0: overrides the vocabulary size (embedding, lm_head); it must exceed
  // the eos id, and above 151645 bos/eos become Qwen3's 151643/151645.
  int vocab = 0;
  double experts_gb = 0;               // qwen3-235b-shaped only (required there)
};

bool is_qwen3_preset(std::string_view name);
std::vector<std::string> qwen3_preset_names();
Result<Qwen3Preset> find_qwen3_preset(std::string_view name, const Qwen3PresetOptions& options = {});

// Bytes of the routed experts of all layers (BF16, or FP8 codes + scales).
uint64_t qwen3_expert_bytes_total(const Qwen3Preset& p);

// config.json as the Hub publishes it (plus "quantization_config" for FP8).
nlohmann::ordered_json qwen3_config_json(const Qwen3Preset& p);
nlohmann::ordered_json qwen3_generation_config_json(const Qwen3Preset& p);

}  // namespace deltafin
