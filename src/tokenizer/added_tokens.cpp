#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <functional>

namespace deltafin::tokenizer {

AddedTokenMatcher::AddedTokenMatcher(std::vector<Entry> entries) {
  for (auto& e : entries) {
    if (e.content.empty()) continue;
    first_byte_[static_cast<unsigned char>(e.content[0])] = true;
    if (std::find(lengths_.begin(), lengths_.end(), e.content.size()) == lengths_.end())
      lengths_.push_back(e.content.size());
    std::string key = e.content;
    by_content_.emplace(std::move(key), std::move(e));
  }
  std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
}

bool AddedTokenMatcher::find(std::string_view text, size_t from, bool allow_special, Hit& hit) const {
  if (by_content_.empty()) return false;
  std::string key;
  for (size_t p = from; p < text.size(); ++p) {
    if (!first_byte_[static_cast<unsigned char>(text[p])]) continue;
    for (size_t len : lengths_) {
      if (p + len > text.size()) continue;
      key.assign(text.data() + p, len);
      auto it = by_content_.find(key);
      if (it == by_content_.end() || (it->second.special && !allow_special)) continue;
      hit = Hit{p, len, it->second.id};
      return true;
    }
  }
  return false;
}

}  // namespace deltafin::tokenizer
