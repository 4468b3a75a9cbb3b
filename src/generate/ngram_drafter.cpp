#include "generate/ngram_drafter.h"

namespace deltafin {

int32_t ngram_next(std::span<const int32_t> seq) {
  const size_t n = seq.size();
  if (n < size_t(NgramDrafter::kMinMatch) + 1) return -1;
  // One backward scan: an occurrence ending at j < n-1 matches m tokens of
  // the suffix; the first (most recent) j with the longest m wins.
  size_t best_len = 0, best_end = 0;
  for (size_t j = n - 1; j-- > 0;) {
    size_t m = 0;
    while (m < size_t(NgramDrafter::kMaxMatch) && m <= j && seq[j - m] == seq[n - 1 - m]) ++m;
    if (m > best_len) {
      best_len = m, best_end = j;
      if (m == size_t(NgramDrafter::kMaxMatch)) break;
    }
  }
  if (best_len < size_t(NgramDrafter::kMinMatch)) return -1;
  return seq[best_end + 1];
}

Result<std::vector<int32_t>> NgramDrafter::propose(std::span<const int32_t> history, int max_k) {
  std::vector<int32_t> seq(history.begin(), history.end());
  std::vector<int32_t> out;
  for (int i = 0; i < max_k; ++i) {
    const int32_t next = ngram_next(seq);
    if (next < 0) break;
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

}  // namespace deltafin
