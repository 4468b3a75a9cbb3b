// Added tokens of a tokenizer.json: found in text before pre-tokenisation,
// leftmost first and, among those starting at one position, longest (HF's
// LeftmostLongest; transformers.js's trie does the same).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deltafin::tokenizer {

class AddedTokenMatcher {
 public:
  struct Entry {
    std::string content;
    uint32_t id;
    bool special;
  };
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<Entry> entries);

  struct Hit {
    size_t pos, len;
    uint32_t id;
  };
  // Leftmost-longest match at or after `from`; special tokens only when
  // `allow_special`.
  bool find(std::string_view text, size_t from, bool allow_special, Hit& hit) const;
  bool empty() const { return by_content_.empty(); }

 private:
  std::unordered_map<std::string, Entry> by_content_;
  std::vector<size_t> lengths_;  // distinct content lengths, longest first
  bool first_byte_[256] = {};
};

}  // namespace deltafin::tokenizer
