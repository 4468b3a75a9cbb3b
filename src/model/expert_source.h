// Where routed experts come from. The engine asks for the union of experts a
// layer needs, once per forward block: begin() starts fetching all of them,
// wait(i) blocks until expert i is usable, so the engine computes each expert
// as it arrives while the rest are still being read. The bytes stay valid
// until the next begin() of any layer (so a source may reuse its buffers).
// prefetch() is a hint: experts a later begin() will probably ask for (the
// engine guesses them with the next layer's router). It never changes what
// begin()/wait() return, only when the bytes arrive.
// Implementations: the mapped checkpoint (here) and the streaming store
// (src/store, src/io).
#pragma once
#include <cstdint>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/config.h"

namespace deltafin {

// One expert matrix in the model's expert format (ModelConfig::moe.format):
// MXFP4 packed [rows, cols/2] + E8M0 scales [rows, cols/32]; BF16 [rows, cols]
// (no scales); FP8 e4m3 [rows, cols] + F32 scales [ceil(rows/128), ceil(cols/128)].
struct ExpertMatrix {
  const uint8_t* packed = nullptr;  // the weight bytes
  const uint8_t* scales = nullptr;
};

// w1 = gate [inter, in], w3 = up [inter, in], w2 = down [in, inter], where
// `in` is the latent width or the hidden size (ModelConfig::expert_in).
struct ExpertWeights {
  ExpertMatrix w1, w2, w3;
};

struct ExpertSourceStats {
  uint64_t experts_acquired = 0;
  uint64_t bytes_touched = 0;  // expert bytes handed to the engine
  // Summed over begin() calls: from the first request of a layer's union to
  // the last byte of its reads arriving (before checksums and compute: the
  // time a drive model predicts; 0 for sources that do not read).
  double read_seconds = 0;
  // Speculative reads: issued by prefetch(), then claimed by a begin() that
  // asked for the same expert (hits) or dropped (their bytes were wasted).
  uint64_t prefetch_issued = 0, prefetch_hits = 0;
  // RAM tier (store only): requests served from RAM, read from a drive,
  // reads published into the tier, misses it did not admit, residents evicted.
  uint64_t ram_hits = 0, ram_misses = 0, ram_fills = 0, ram_bypassed = 0, ram_evictions = 0;
  uint64_t ram_adopted = 0;  // fills that took a claimed guess's arena buffer in place (no copy)
  uint64_t ram_slots = 0;
  // A streamed store (store only): experts fetched over the network on first
  // use, and the seconds begin() spent fetching them.
  uint64_t streamed_experts = 0;
  double streamed_seconds = 0;
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Starts making experts[i] of `layer` available as out[i] (out must stay
  // alive until every wait() returned). An error names the expert and file.
  virtual Status begin(int layer, std::span<const int> experts, std::span<ExpertWeights> out) = 0;
  // Blocks until out[i] of the last begin() is usable. Safe to call from
  // several threads at once for distinct i.
  virtual Status wait(size_t i) = 0;
  virtual ExpertSourceStats stats() const = 0;
  // The most experts one begin() may ask for (a bounded read arena); the
  // MoE fetches a larger union in tiles of at most this many.
  virtual size_t max_batch() const { return SIZE_MAX; }
  // True when wait(i) of the last begin() would not block now (a RAM tier
  // hit, a read already in). The MoE computes such experts first while the
  // others are still read; a hint only, it never changes what wait() returns.
  // Safe to call from several threads at once. Default: nothing is known.
  virtual bool ready(size_t /*i*/) const { return false; }
  // Starts reading experts of a layer not yet begun, most likely first, as
  // far as the source's prefetch budget allows. Default: nothing to do.
  virtual void prefetch(int /*layer*/, std::span<const int> /*experts*/) {}
  // begin() and then every wait().
  Status acquire(int layer, std::span<const int> experts, std::span<ExpertWeights> out);
};

// Experts read in place from the mapped shards, named as the model's family
// names them (src/model/families/). Checks every expert's tensors (names,
// dtypes, shapes) at construction; MXFP4 scale bytes (255 is invalid) and FP8
// codes and scales (NaN, Inf, 0) are checked the first time an expert is
// used, so a full-size checkpoint is not read end to end at start-up.
class CheckpointExpertSource : public ExpertSource {
 public:
  static Result<std::unique_ptr<CheckpointExpertSource>> create(const Checkpoint& ck, const ModelConfig& cfg);
  // The mapping is already there: begin() fills every out[i], wait() has nothing to do.
  Status begin(int layer, std::span<const int> experts, std::span<ExpertWeights> out) override;
  Status wait(size_t) override { return {}; }
  bool ready(size_t) const override { return true; }
  ExpertSourceStats stats() const override { return stats_; }

 private:
  struct Entry {
    const TensorInfo* tensors[6] = {};  // w1 weight, w1 scale, w2 weight, w2 scale, w3 weight, w3 scale (null: none)
    bool scales_checked = false;
  };
  ModelConfig cfg_;
  std::vector<Entry> entries_;  // [layer * experts + e]; empty rows for dense layers
  ExpertSourceStats stats_;
};

// Checks that no E8M0 scale byte is 255; names the tensor on failure.
Status check_mxfp4_scales(const TensorInfo& scale_tensor);
// Checks an FP8 weight: no NaN code (0x7F, 0xFF) and every block scale finite and > 0.
Status check_fp8_block(const TensorInfo& weight, const TensorInfo& scales);

}  // namespace deltafin
