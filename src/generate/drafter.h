// A drafter guesses the tokens the target will decide next; the target checks
// every guess (generate/speculative.h), so a drafter can only change how many
// target passes a request takes, never a token. Its proposals are untrusted
// input: any id, any length.
//
// Protocol, per request:
//   reset()                          a new request
//   observe(rows)                    after every block the target commits
//   propose(history, k) -> ids       history = prompt + emitted tokens; its
//                                    last id is pending (the target has not
//                                    run it yet)
//   accept(n)                        the first n ids of the last proposal were
//                                    the target's: keep the drafter's state for
//                                    them and drop the rest (its rollback)
//   fall_back() -> bool              drafting did not pay: switch to a next
//                                    drafter for the rest of the request, if
//                                    there is one
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin {

// Rows the target just committed: positions [first_position, +tokens.size()),
// and, for a drafter that asked for target layers, their captured hidden rows
// [rows][layers][hidden] (Model::captured_rows()).
struct TargetRows {
  int64_t first_position = 0;
  std::span<const int32_t> tokens;
  std::span<const float> hidden;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Target layers whose hidden rows observe() needs (block drafters); empty: none.
  virtual std::vector<int> target_layers() const { return {}; }
  virtual Status reset() = 0;
  virtual Status observe(const TargetRows& /*rows*/) { return {}; }
  virtual Result<std::vector<int32_t>> propose(std::span<const int32_t> history, int max_k) = 0;
  virtual Status accept(size_t accepted) = 0;
  virtual bool fall_back() { return false; }
};

// Drafters tried in order: when the policy switches one off for a request,
// the next takes over (models/demo-draft, then n-gram). The first one may read
// target layers; later ones are told only about rows committed after they
// took over, so they must catch up from the history themselves (the n-gram
// and model drafters do).
class DrafterChain : public Drafter {
 public:
  explicit DrafterChain(std::vector<std::unique_ptr<Drafter>> drafters) : d_(std::move(drafters)) {}
  std::string name() const override { return d_[at_]->name(); }
  std::vector<int> target_layers() const override { return at_ == 0 ? d_[0]->target_layers() : std::vector<int>{}; }
  Status reset() override {
    at_ = 0;
    for (auto& d : d_) DF_TRY(d->reset());
    return {};
  }
  Status observe(const TargetRows& r) override { return d_[at_]->observe(r); }
  Result<std::vector<int32_t>> propose(std::span<const int32_t> h, int k) override { return d_[at_]->propose(h, k); }
  Status accept(size_t n) override { return d_[at_]->accept(n); }
  bool fall_back() override {
    if (d_[at_]->fall_back()) return true;
    if (at_ + 1 >= d_.size()) return false;
    ++at_;
    return true;
  }

 private:
  std::vector<std::unique_ptr<Drafter>> d_;
  size_t at_ = 0;
};

}  // namespace deltafin
