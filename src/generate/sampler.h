// Choosing the next token from the target's logits: greedy (the default) or
// seeded sampling, as a pure function of (logits, parameters, seed, position,
// tokens generated so far). Nothing in it depends on how many rows a forward
// pass ran, so drafting can verify a draft against the very token a plain step
// would have drawn at that position: output with drafting equals output
// without it, also when sampling (docs/guide/sampling.md).
//
// One decision, in this order:
//   1. penalties: logit[j] -= frequency_penalty * count[j] + presence_penalty * (count[j] > 0),
//      count[j] = how often j was generated so far in this request (not the prompt);
//   2. temperature 0: the argmax (ties to the lowest id), and nothing below applies;
//   3. s[j] = logit[j] / temperature, in double; w[j] = exp(s[j] - max s);
//   4. the cut, over ids ranked by descending s (ties: the lower id first): the
//      first L ranks are kept, L the least of top_k (when > 0), the shortest
//      ranked prefix whose w (summed in rank order) reaches top_p x the sum of
//      all w (summed in id order; when top_p < 1), and the number of ids with
//      w >= min_p (when min_p > 0; the best has w = 1);
//   5. u = a uniform double in [0, 1) from a counter-based generator keyed by
//      (seed, position); the token is the first kept id, in id order, at which
//      the running sum of w exceeds u x (the sum of the kept w, in id order).
// Every sum is in double in a fixed order, so the choice is bit-reproducible.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace deltafin {

struct SamplingParams {
  double temperature = 0;  // 0: greedy
  double top_p = 1;        // (0, 1]
  int top_k = 0;           // 0: all
  double min_p = 0;        // [0, 1]
  double presence_penalty = 0, frequency_penalty = 0;  // [-2, 2] in the OpenAI API
  uint64_t seed = 0;

  bool greedy() const { return temperature == 0; }
  bool penalised() const { return presence_penalty != 0 || frequency_penalty != 0; }
};

// The uniform draw for (seed, position): SplitMix64's finaliser over the two,
// 53 bits into [0, 1). The same pair always gives the same number.
double counter_uniform(uint64_t seed, int64_t position);

class TokenPicker {
 public:
  explicit TokenPicker(SamplingParams p = {}) : p_(p) {}

  const SamplingParams& params() const { return p_; }
  // The token for `position` (the index it will have in the sequence). Does
  // not change the picker: accept() records a token once it is emitted.
  int32_t pick(std::span<const float> logits, int64_t position);
  void accept(int32_t token);

  // Tentative acceptance (a draft's rows checked ahead of emission): mark,
  // accept a few, then rewind to the mark.
  size_t mark() const { return generated_.size(); }
  void rewind(size_t mark);

 private:
  SamplingParams p_;
  std::vector<int32_t> generated_;
  std::unordered_map<int32_t, int32_t> counts_;
  // Scratch reused across decisions (no allocation once warm).
  std::vector<float> penalised_;
  std::vector<double> s_, w_;
  std::vector<int32_t> order_;
};

}  // namespace deltafin
