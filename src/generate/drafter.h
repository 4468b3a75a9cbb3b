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
#pragma once
#include <cstdint>
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
};

}  // namespace deltafin
