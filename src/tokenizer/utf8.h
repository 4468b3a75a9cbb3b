// UTF-8 helpers shared by the tokenizer: strict validation (RFC 3629: no
// overlongs, no surrogates, nothing above U+10FFFF) and code point decoding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deltafin::tokenizer {

inline constexpr size_t kUtf8Valid = static_cast<size_t>(-1);

// Offset of the first byte that does not start a valid UTF-8 sequence, or
// kUtf8Valid when the whole string is valid.
size_t first_invalid_utf8(std::string_view s);

// Length of the complete sequence starting at s[i] (1..4), assuming valid UTF-8.
inline size_t utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Decodes the code point at s[i] of a valid UTF-8 string and advances i.
uint32_t next_code_point(std::string_view s, size_t& i);

// Python's str.isspace(): Unicode White_Space plus U+001C..U+001F. Used by
// K3's long-run splitting (docs/design/tokenizer.md).
bool is_python_space(uint32_t cp);

// Replaces invalid sequences with U+FFFD (one per maximal invalid subpart).
std::string to_valid_utf8(std::string_view bytes);

// Length of the longest prefix of `bytes` that ends on a character boundary,
// given that any trailing incomplete sequence may still be completed.
size_t complete_prefix_length(std::string_view bytes);

}  // namespace deltafin::tokenizer
