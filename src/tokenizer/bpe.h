// Byte-pair encoding of one pre-token with tiktoken's rule: repeatedly merge
// the adjacent pair whose concatenation has the lowest rank (leftmost on
// ties) until no adjacent pair has a rank (docs/design/tokenizer.md).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/rank_table.h"

namespace deltafin::tokenizer {

// Appends the ranks of `piece` (non-empty) to `out`.
void bpe_encode(const RankTable& table, std::string_view piece, std::vector<uint32_t>& out);

// The straightforward quadratic scan (tiktoken's algorithm), used for short
// pieces and by tests as the reference for the heap version.
void bpe_encode_linear(const RankTable& table, std::string_view piece, std::vector<uint32_t>& out);
void bpe_encode_heap(const RankTable& table, std::string_view piece, std::vector<uint32_t>& out);

}  // namespace deltafin::tokenizer
