// Where routed experts come from. The engine asks for the union of experts a
// layer needs, once per forward block; the source makes their MXFP4 bytes
// available until the next acquire() of any layer (so a source may reuse its
// buffers). Implementations: the mapped checkpoint (here) and the streaming
// store (src/store, src/io).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/config.h"

namespace deltafin {

struct Mxfp4Matrix {
  const uint8_t* packed = nullptr;  // [rows, cols/2]
  const uint8_t* scales = nullptr;  // [rows, cols/32]
};

// w1 = gate [inter, latent], w3 = up [inter, latent], w2 = down [latent, inter].
struct ExpertWeights {
  Mxfp4Matrix w1, w2, w3;
};

struct ExpertSourceStats {
  uint64_t experts_acquired = 0;
  uint64_t bytes_touched = 0;  // expert bytes handed to the engine
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Fills out[i] for experts[i] of `layer`; an error names the expert and file.
  virtual Status acquire(int layer, std::span<const int> experts, std::span<ExpertWeights> out) = 0;
  virtual ExpertSourceStats stats() const = 0;
};

// Experts read in place from the mapped shards. Checks every expert's six
// tensors (names, dtypes, shapes) at construction; scale bytes are checked the
// first time an expert is used (255 is invalid), so a full-size checkpoint is
// not read end to end at start-up.
class CheckpointExpertSource : public ExpertSource {
 public:
  static Result<std::unique_ptr<CheckpointExpertSource>> create(const Checkpoint& ck, const ModelConfig& cfg);
  Status acquire(int layer, std::span<const int> experts, std::span<ExpertWeights> out) override;
  ExpertSourceStats stats() const override { return stats_; }

 private:
  struct Entry {
    const TensorInfo* tensors[6];  // w1 packed, w1 scale, w2 packed, w2 scale, w3 packed, w3 scale
    bool scales_checked = false;
  };
  ModelConfig cfg_;
  std::vector<Entry> entries_;  // [layer * experts + e]; empty rows for dense layers
  ExpertSourceStats stats_;
};

// Checks that no E8M0 scale byte is 255; names the tensor on failure.
Status check_mxfp4_scales(const TensorInfo& scale_tensor);

}  // namespace deltafin
