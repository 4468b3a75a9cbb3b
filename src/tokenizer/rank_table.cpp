#include "tokenizer/rank_table.h"

#include <cstring>
#include <xxhash.h>

namespace deltafin::tokenizer {

RankTable::RankTable(const std::vector<std::string>& tokens) {
  size_t total = 0;
  for (const auto& t : tokens) total += t.size();
  arena_.reserve(total);
  offsets_.reserve(tokens.size() + 1);
  for (const auto& t : tokens) {
    offsets_.push_back(static_cast<uint32_t>(arena_.size()));
    arena_ += t;
  }
  offsets_.push_back(static_cast<uint32_t>(arena_.size()));
  size_t cap = 16;
  while (cap < tokens.size() * 2) cap <<= 1;  // load factor <= 0.5
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (uint32_t r = 0; r < tokens.size(); ++r) {
    const uint64_t h = XXH3_64bits(tokens[r].data(), tokens[r].size());
    uint64_t i = h & mask_;
    while (slots_[i].rank != kNoRank) i = (i + 1) & mask_;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), r};
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_rank_[b] = find(std::string_view(&c, 1));
  }
}

uint32_t RankTable::find(std::string_view key) const {
  if (slots_.empty()) return kNoRank;
  const uint64_t h = XXH3_64bits(key.data(), key.size());
  const uint32_t tag = static_cast<uint32_t>(h >> 32);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.rank == kNoRank) return kNoRank;
    if (s.tag == tag) {
      const uint32_t off = offsets_[s.rank], len = offsets_[s.rank + 1] - off;
      if (len == key.size() && std::memcmp(arena_.data() + off, key.data(), len) == 0) return s.rank;
    }
  }
}

}  // namespace deltafin::tokenizer
