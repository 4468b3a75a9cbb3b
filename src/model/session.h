// Per-sequence state: KDA recurrent state and conv windows per KDA layer, the
// KV cache per GQA layer, and the MLA *latent* cache per MLA layer (normalised kv latent + shared rope
// key per position; docs/design/engine.md). A Session is a plain value: copying it is
// a snapshot; restoring is assignment.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace deltafin {

struct KdaLayerState {
  std::vector<float> conv_q, conv_k, conv_v;  // [channels][kernel], oldest first
  std::vector<float> S;                       // [heads][head_dim (key)][head_dim (value)]
};

// One MLA layer's cache, in chunks of kChunk positions: a chunk holds its
// positions' latents [kChunk][latent_dim] and then their rope keys
// [kChunk][rope_dim]. Chunks never move once written: the cache grows by
// adding chunks (nothing already there is copied) and attention walks it a
// chunk at a time.
class MlaLayerCache {
 public:
  static constexpr size_t kChunk = 256;

  void init(size_t latent_dim, size_t rope_dim);
  size_t length() const { return length_; }
  size_t latent_dim() const { return latent_dim_; }
  size_t rope_dim() const { return rope_dim_; }
  // Makes room for positions [0, n); what is there stays in place.
  void reserve(size_t n);
  // Positions [0, n) are the cache (n <= reserved).
  void set_length(size_t n) { length_ = n; }
  // Drops positions from n on (keeps the chunk that holds position n).
  void truncate(size_t n);

  float* latent(size_t p) { return chunks_[p / kChunk].data() + (p % kChunk) * latent_dim_; }
  float* rope(size_t p) { return chunks_[p / kChunk].data() + kChunk * latent_dim_ + (p % kChunk) * rope_dim_; }
  const float* latent(size_t p) const { return chunks_[p / kChunk].data() + (p % kChunk) * latent_dim_; }
  const float* rope(size_t p) const {
    return chunks_[p / kChunk].data() + kChunk * latent_dim_ + (p % kChunk) * rope_dim_;
  }
  uint64_t bytes() const { return 4 * uint64_t(length_) * (latent_dim_ + rope_dim_); }

 private:
  size_t latent_dim_ = 0, rope_dim_ = 0, length_ = 0;
  std::vector<std::vector<float>> chunks_;
};

// One GQA layer's KV cache: per position the rotated keys and the values of
// every KV head, [kv_heads * head_dim] each, in the same never-moving chunks.
class KvLayerCache {
 public:
  void init(size_t kv_dim) { rows_.init(kv_dim, kv_dim); }
  size_t length() const { return rows_.length(); }
  void reserve(size_t n) { rows_.reserve(n); }
  void set_length(size_t n) { rows_.set_length(n); }
  void truncate(size_t n) { rows_.truncate(n); }
  float* key(size_t p) { return rows_.latent(p); }
  float* value(size_t p) { return rows_.rope(p); }
  const float* key(size_t p) const { return rows_.latent(p); }
  const float* value(size_t p) const { return rows_.rope(p); }
  uint64_t bytes() const { return rows_.bytes(); }

 private:
  MlaLayerCache rows_;  // keys in the "latent" rows, values in the "rope" rows
};

struct Session {
  int64_t length = 0;                 // positions committed
  std::vector<KdaLayerState> kda;     // indexed by layer; empty for MLA layers
  std::vector<MlaLayerCache> mla;     // indexed by layer; unused for KDA layers
  std::vector<KvLayerCache> kv;       // indexed by layer; unused but for GQA layers

  static Session create(const ModelConfig& cfg);
  // Drops MLA and KV cache rows past `length` (KDA state cannot be truncated: restore a snapshot).
  void truncate_mla(int64_t new_length, const ModelConfig& cfg);
  uint64_t bytes() const;
};

}  // namespace deltafin
