#include "tokenizer/specials.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace deltafin::tokenizer {

Result<SpecialTokens> SpecialTokens::create(std::map<uint32_t, std::string> by_id) {
  SpecialTokens s;
  for (const auto& [id, text] : by_id) {
    if (text.empty()) return error("special token {}: empty spelling", id);
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80 || static_cast<unsigned char>(c) < 0x20)
        return error("special token {}: spelling must be printable ASCII", id);
    auto [it, inserted] = s.by_spelling_.emplace(text, id);
    if (!inserted) return error("special token {}: spelling '{}' also used by id {}", id, text, it->second);
    s.first_byte_[static_cast<unsigned char>(text[0])] = true;
    if (std::find(s.lengths_.begin(), s.lengths_.end(), text.size()) == s.lengths_.end())
      s.lengths_.push_back(text.size());
  }
  // Prefix check: sorted spellings put a prefix right before its extensions.
  std::vector<std::string_view> sorted;
  for (const auto& [text, id] : s.by_spelling_) sorted.push_back(text);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i + 1 < sorted.size(); ++i)
    if (sorted[i + 1].substr(0, sorted[i].size()) == sorted[i])
      return error("special token '{}' is a prefix of '{}'", sorted[i], sorted[i + 1]);
  std::sort(s.lengths_.begin(), s.lengths_.end());
  s.by_id_ = std::move(by_id);
  return s;
}

Result<SpecialTokens> SpecialTokens::create_lookup_only(std::map<uint32_t, std::string> by_id) {
  SpecialTokens s;
  for (const auto& [id, text] : by_id) {
    if (text.empty()) return error("special token {}: empty spelling", id);
    auto [it, inserted] = s.by_spelling_.emplace(text, id);
    if (!inserted) return error("special token {}: spelling '{}' also used by id {}", id, text, it->second);
  }
  s.by_id_ = std::move(by_id);
  return s;
}

Result<SpecialTokens> SpecialTokens::from_tokenizer_config(std::string_view config_json, uint32_t first_id,
                                                           uint32_t count, const std::string& name) {
  std::map<uint32_t, std::string> by_id;
  for (uint32_t i = 0; i < count; ++i) by_id[first_id + i] = fmt::format("<|reserved_token_{}|>", first_id + i);
  if (!config_json.empty()) {
    nlohmann::json j = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return error("{}: not a JSON object", name);
    if (j.contains("added_tokens_decoder")) {
      const auto& d = j["added_tokens_decoder"];
      if (!d.is_object()) return error("{}: added_tokens_decoder is not an object", name);
      for (const auto& [key, entry] : d.items()) {
        uint32_t id = 0;
        const auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (ec != std::errc() || ptr != key.data() + key.size())
          return error("{}: added_tokens_decoder key '{}' is not an id", name, key);
        if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string())
          return error("{}: added_tokens_decoder[{}].content missing or not a string", name, key);
        if (id < first_id || id >= first_id + count)
          return error("{}: added_tokens_decoder id {} outside the special range {}..{}", name, id, first_id,
                       first_id + count - 1);
        by_id[id] = entry["content"].get<std::string>();
      }
    }
  }
  auto s = create(std::move(by_id));
  if (!s.ok()) return s.status().with_context(name);
  return s;
}

Result<SpecialTokens> SpecialTokens::from_json(std::string_view json, const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error("{}: not a JSON object", name);
  if (j.contains("added_tokens_decoder")) j = j["added_tokens_decoder"];
  std::map<uint32_t, std::string> by_id;
  for (const auto& [key, value] : j.items()) {
    if (value.is_number_unsigned()) {
      by_id[value.get<uint32_t>()] = key;  // {"spelling": id}
    } else if (value.is_object() && value.contains("content") && value["content"].is_string()) {
      uint32_t id = 0;
      const auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || ptr != key.data() + key.size())
        return error("{}: key '{}' is not an id", name, key);
      by_id[id] = value["content"].get<std::string>();
    } else {
      return error("{}: entry '{}' is neither an id nor {{\"content\": ...}}", name, key);
    }
  }
  auto s = create(std::move(by_id));
  if (!s.ok()) return s.status().with_context(name);
  return s;
}

const std::string* SpecialTokens::spelling(uint32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

int64_t SpecialTokens::id_of(std::string_view spelling) const {
  auto it = by_spelling_.find(std::string(spelling));
  return it == by_spelling_.end() ? -1 : it->second;
}

bool SpecialTokens::find(std::string_view text, size_t from, Hit& hit) const {
  if (by_id_.empty()) return false;
  std::string key;
  for (size_t p = from; p < text.size(); ++p) {
    if (!first_byte_[static_cast<unsigned char>(text[p])]) continue;
    for (size_t len : lengths_) {
      if (p + len > text.size()) break;
      key.assign(text.data() + p, len);
      auto it = by_spelling_.find(key);
      if (it != by_spelling_.end()) {
        hit = Hit{p, len, it->second};
        return true;
      }
    }
  }
  return false;
}

}  // namespace deltafin::tokenizer
