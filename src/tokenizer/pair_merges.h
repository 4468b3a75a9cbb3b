// Byte-pair merging by pair priority, as Hugging Face's BPE model does it:
// repeatedly merge the adjacent pair of symbols that comes first in the merge
// list (leftmost on ties). tiktoken's rule (bpe.h) instead ranks the merged
// bytes, which can pick a different pair when a token is reachable by two
// splits; tokenizer.json files are encoded with this rule.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace deltafin::tokenizer {

class PairMerges {
 public:
  struct Merge {
    uint32_t left, right, result;
  };
  PairMerges() = default;
  // merges[rank]; a repeated pair keeps its last rank, as HF's and
  // transformers.js's maps do.
  explicit PairMerges(const std::vector<Merge>& merges);

  // Merges `symbols` (ids) in place.
  void apply(std::vector<uint32_t>& symbols) const;
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    uint32_t rank = 0, result = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  // Rank and result of the pair, or false if it is not a merge.
  bool find(uint32_t left, uint32_t right, uint32_t& rank, uint32_t& result) const;
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace deltafin::tokenizer
