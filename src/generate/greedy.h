// Generation on top of forward(rows): chunked prefill, then one row per step.
// Greedy by default (argmax ties go to the lowest id); seeded sampling through
// GenerateOptions::picker.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "generate/sampler.h"
#include "model/model.h"

namespace deltafin {

struct GenerateOptions {
  int max_new = 32;
  int prefill_chunk = 512;  // rows per prompt block; each block reads its experts once (docs/results/2026-11-30-k3s-cold-decode.md)
  std::vector<int32_t> stop_ids;  // generation stops after emitting one of these
  // Asked between prompt blocks and before each decode step; true ends
  // generation there (not an error: the stats cover what ran). `run` uses
  // it for SIGINT.
  std::function<bool()> interrupted;
  // Set from another thread to stop: generate() returns Status::cancelled()
  // before the next layer of the block in flight (prefill or decode).
  const std::atomic<bool>* cancel = nullptr;
  // How each token is chosen (generate/sampler.h); null: greedy. The picker
  // is told every emitted token (its penalties count them).
  TokenPicker* picker = nullptr;
};

struct GenerateStats {
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  ForwardStats forward;
};

// Called once per decided token with the logits that decided it; return false to stop.
using TokenCallback = std::function<bool(int32_t token, std::span<const float> logits)>;

int32_t argmax_lowest(std::span<const float> logits);

// The token for `position` (its index in the sequence): opt.picker's choice, else the argmax.
inline int32_t decide_token(const GenerateOptions& opt, std::span<const float> logits, int64_t position) {
  return opt.picker ? opt.picker->pick(logits, position) : argmax_lowest(logits);
}

// Hands opt.cancel to the model (checked between layers) for its lifetime;
// cleared again however generation ends.
class CancelScope {
 public:
  CancelScope(Model& m, const std::atomic<bool>* cancel) : m_(m) { m_.set_cancel_flag(cancel); }
  ~CancelScope() { m_.set_cancel_flag(nullptr); }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  Model& m_;
};

Status generate(Model& model, Session& session, std::span<const int32_t> prompt, const GenerateOptions& opt,
                const TokenCallback& on_token, GenerateStats* stats = nullptr);

}  // namespace deltafin
