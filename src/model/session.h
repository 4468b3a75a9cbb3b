// Per-sequence state: KDA recurrent state and conv windows per KDA layer, and
// the MLA *latent* cache per MLA layer (normalised kv latent + shared rope
// key per token; ARCHITECTURE §5). A Session is a plain value: copying it is a
// snapshot; restoring is assignment.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace deltafin {

struct KdaLayerState {
  std::vector<float> conv_q, conv_k, conv_v;  // [channels][kernel], oldest first
  std::vector<float> S;                       // [heads][head_dim (key)][head_dim (value)]
};

struct MlaLayerCache {
  std::vector<float> latent;    // [length][kv_lora_rank]
  std::vector<float> rope_key;  // [length][qk_rope_dim]
};

struct Session {
  int64_t length = 0;                 // positions committed
  std::vector<KdaLayerState> kda;     // indexed by layer; empty for MLA layers
  std::vector<MlaLayerCache> mla;     // indexed by layer; empty for KDA layers

  static Session create(const ModelConfig& cfg);
  // Drops MLA cache rows past `length` (KDA state cannot be truncated: restore a snapshot).
  void truncate_mla(int64_t new_length, const ModelConfig& cfg);
  uint64_t bytes() const;
};

}  // namespace deltafin
