// Log probabilities of the target's own distribution (the fp32 logits, before
// any temperature, penalty or cut): log-softmax in double, for the emitted
// token and the k likeliest. Used by the server's `logprobs` (docs/guide/serving.md).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace deltafin {

struct IdLogprob {
  int32_t id;
  double logprob;
};

struct Logprobs {
  double chosen = 0;            // log p(chosen)
  std::vector<IdLogprob> top;   // the k likeliest, descending (ties: the lower id first)
};

// log p(j) = logit[j] - (m + log sum_i exp(logit[i] - m)), m the largest logit;
// the sum runs in id order in double.
Logprobs logprobs_of(std::span<const float> logits, int32_t chosen, int k);

}  // namespace deltafin
