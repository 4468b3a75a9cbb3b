// Byte string -> rank lookup, the hot path of BPE. Open addressing over a
// power-of-two table with XXH3 hashes; keys live in one arena so a probe
// touches one slot and, on a hash match, one memcmp.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin::tokenizer {

inline constexpr uint32_t kNoRank = 0xFFFFFFFFu;

class RankTable {
 public:
  RankTable() = default;
  explicit RankTable(const std::vector<std::string>& tokens);  // tokens[rank] = bytes

  uint32_t find(std::string_view bytes) const;
  size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  std::string_view bytes(uint32_t rank) const {
    return std::string_view(arena_.data() + offsets_[rank], offsets_[rank + 1] - offsets_[rank]);
  }
  // Rank of each single byte, precomputed (every byte has one).
  uint32_t byte_rank(unsigned char b) const { return byte_rank_[b]; }

 private:
  struct Slot {
    uint32_t tag = 0;  // high 32 bits of the hash
    uint32_t rank = kNoRank;
  };
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  std::string arena_;
  std::vector<uint32_t> offsets_;
  uint32_t byte_rank_[256] = {};
};

}  // namespace deltafin::tokenizer
