// Model presets for `make-model`: K3's structure at scaled widths (tiny,
// small), K3's routing shape with expert widths sized to a byte budget
// (k3-shaped) and K3's real configuration (k3-full-sparse). A preset is the set of
// numbers config.json carries plus how the checkpoint is laid out on disk.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deltafin {

struct ModelPreset {
  std::string name;
  int hidden = 0, num_layers = 0, vocab = 0, dense_inter = 0;
  int attn_res_block = 0, first_k_dense = 1;
  int kda_heads = 0, kda_head_dim = 0, conv_kernel = 4;
  int a_log_len = 0;  // >= kda_heads; the tail is zero padding (K3: 128 for 96 heads)
  int mla_heads = 0, q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;
  int experts = 0, top_k = 0, shared = 2, expert_inter = 0, latent = 0;
  int text_ranks = 0;  // tiktoken ranks; specials are ids text_ranks .. text_ranks+255
  int64_t max_positions = 0;
  int shards = 1, shard_digits = 5;  // shard count and digits of the "-of-" total
  bool sparse = false;               // data left as holes (metadata-only checkpoint)
  bool write_rank_file = true;       // tiktoken.model (byte-level) for scaled presets
  double experts_gb = 0;             // k3-shaped: the expert budget the widths were sized from
  // Popularity skew of the routing (make-model --route-skew): each layer's
  // correction bias gets route_skew x (an Exp(1) draw - ln 2), so a few
  // experts per layer are chosen far more often than the median, as in the
  // real K3. 0: the plain small random bias (and the same bytes as before).
  double route_skew = 0;
  // Token-to-token persistence of the routing (make-model --route-persist W,
  // docs/guide/drives-and-ram-tier.md): text tokens' embeddings blend a point on a smooth
  // ring (weight W) with a random identity, scaled to dominate the residual
  // stream, and lm_head maps each token's identity to the next token, so
  // greedy decoding walks along the ring and consecutive tokens route alike.
  // 0: the plain random rows (and the same bytes as before).
  double route_persist = 0;

  int bos_id() const { return text_ranks; }
  int eos_id() const { return text_ranks + 2; }
  int pad_id() const { return text_ranks + 255; }
  // K3's schedule rule (docs/design/checkpoint.md): MLA iff (l+1) % 4 == 0 or l is the last layer.
  bool is_mla(int layer) const { return (layer + 1) % 4 == 0 || layer == num_layers - 1; }
  bool is_moe(int layer) const { return layer >= first_k_dense; }
};

std::vector<std::string> preset_names();
// experts_gb: total routed-expert bytes (1e9 units) for `k3-shaped`, which
// requires it (> 0); the other presets refuse it (0 = not given).
Result<ModelPreset> find_preset(std::string_view name, double experts_gb = 0);

// Bytes of one routed expert's six MXFP4 records (w1, w2, w3 packed + scales).
uint64_t preset_expert_bytes(const ModelPreset& p);
int preset_moe_layers(const ModelPreset& p);

// config.json (root + text_config) for a preset, in the published layout.
nlohmann::ordered_json preset_config_json(const ModelPreset& p);
// generation_config.json.
nlohmann::ordered_json preset_generation_config_json(const ModelPreset& p);
// tokenizer_config.json: the 256 special ids after the ranks, spelled as K3's.
nlohmann::ordered_json preset_tokenizer_config_json(const ModelPreset& p);
// tiktoken.model text: one "base64(byte) rank" line per single byte.
std::string byte_level_rank_file();

}  // namespace deltafin
