// Prompt lookup: no model. To guess the next token, find the most recent
// earlier place where the history's last tokens occurred (the longest such
// suffix, 6 tokens down to 2) and take the token that followed it; append it
// and repeat. Strong on text that repeats itself (code, quoting the prompt),
// silent elsewhere: a history with no repeated suffix gets no proposal.
#pragma once
#include "generate/drafter.h"

namespace deltafin {

class NgramDrafter : public Drafter {
 public:
  static constexpr int kMaxMatch = 6, kMinMatch = 2;

  std::string name() const override { return "ngram"; }
  Status reset() override { return {}; }
  Result<std::vector<int32_t>> propose(std::span<const int32_t> history, int max_k) override;
  Status accept(size_t) override { return {}; }
};

// The token that followed the most recent earlier occurrence of seq's
// longest repeated suffix (kMinMatch..kMaxMatch tokens), or -1.
int32_t ngram_next(std::span<const int32_t> seq);

}  // namespace deltafin
