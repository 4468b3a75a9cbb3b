// Special tokens: id <-> ASCII spelling, and finding the leftmost spelling in
// text when specials are enabled (control segments only, docs/design/tokenizer.md).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace deltafin::tokenizer {

class SpecialTokens {
 public:
  // Validates: spellings non-empty ASCII, ids and spellings unique, and no
  // spelling a byte-prefix of another (so the leftmost match is unambiguous).
  static Result<SpecialTokens> create(std::map<uint32_t, std::string> by_id);
  // For tokenizer.json, whose added tokens are matched elsewhere
  // (added_tokens.h): only non-empty and unique spellings are required, so
  // find() may not be used on the result.
  static Result<SpecialTokens> create_lookup_only(std::map<uint32_t, std::string> by_id);

  // K3 layout (docs/design/tokenizer.md): `count` reserved ids from `first_id`, spelled
  // <|reserved_token_{id}|> unless added_tokens_decoder names them.
  // `config_json` is the text of tokenizer_config.json ("" = none).
  static Result<SpecialTokens> from_tokenizer_config(std::string_view config_json, uint32_t first_id,
                                                     uint32_t count, const std::string& name);
  // A flat JSON object {"spelling": id, ...} (tiktoken's special_tokens form)
  // or an added_tokens_decoder-style object {"id": {"content": ...}}.
  static Result<SpecialTokens> from_json(std::string_view json, const std::string& name);

  bool empty() const { return by_id_.empty(); }
  size_t size() const { return by_id_.size(); }
  const std::map<uint32_t, std::string>& by_id() const { return by_id_; }
  // nullptr if `id` is not special.
  const std::string* spelling(uint32_t id) const;
  // Id of an exact spelling, or -1.
  int64_t id_of(std::string_view spelling) const;

  // Leftmost occurrence of any spelling in text at or after `from`.
  struct Hit {
    size_t pos;
    size_t len;
    uint32_t id;
  };
  bool find(std::string_view text, size_t from, Hit& hit) const;

 private:
  std::map<uint32_t, std::string> by_id_;
  std::unordered_map<std::string, uint32_t> by_spelling_;
  std::vector<size_t> lengths_;  // distinct spelling lengths
  bool first_byte_[256] = {};
};

}  // namespace deltafin::tokenizer
