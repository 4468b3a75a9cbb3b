// A same-vocabulary causal model (a K3-layout checkpoint, e.g.
// models/demo-draft) drafting a chain: greedy, one token per step, in its
// own Session.
//
// Its rollback: before it feeds its own guesses it keeps a copy of its KDA
// state (the drafter's, small: no target state is ever copied) and the
// session length. When a guess is rejected it restores that copy and
// truncates its MLA caches; the accepted guesses and the target's token are
// then fed as one block at the next proposal (forward(rows) gives each row
// the same values as one-at-a-time steps).
#pragma once
#include <memory>

#include "generate/drafter.h"
#include "model/model.h"

namespace deltafin {

class ModelDrafter : public Drafter {
 public:
  // `target` is the model it drafts for: the vocabularies must match.
  static Result<std::unique_ptr<ModelDrafter>> open(const std::string& dir, const ModelConfig& target, int threads);
  explicit ModelDrafter(std::unique_ptr<Model> model);

  std::string name() const override { return "model"; }
  Status reset() override;
  // Before its first proposal of a request it runs the rows the target
  // commits (the prompt, during the target's prefill); after that it catches
  // up lazily inside propose(), so a paused or switched-off request costs it nothing.
  Status observe(const TargetRows& rows) override;
  Result<std::vector<int32_t>> propose(std::span<const int32_t> history, int max_k) override;
  Status accept(size_t accepted) override;

  Model& model() { return *model_; }
  const Session& session() const { return session_; }
  // Tokens its session holds, in order (for tests).
  const std::vector<int32_t>& fed() const { return fed_; }

 private:
  std::unique_ptr<Model> model_;
  Session session_;
  std::vector<int32_t> fed_;  // what session_ has run, position by position
  // The state before the last chain's own guesses were fed.
  std::vector<KdaLayerState> kda_before_;
  size_t fed_before_ = 0;
  size_t chain_fed_ = 0;  // guesses of the last proposal fed into session_
  bool proposed_ = false;  // a proposal was made since reset()
  std::vector<float> logits_;
  Status rewind();
  Status feed(std::span<const int32_t> tokens);
};

}  // namespace deltafin
