#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace deltafin::tokenizer {

namespace {

struct Tables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // code point (< 512) -> byte, -1 if none
  Tables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? uint32_t(b) : next++;
      to_byte[to_char[b]] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else {  // every byte-level character is below U+0800
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace

uint32_t byte_level_char(uint8_t b) { return tables().to_char[b]; }

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_level_char(uint8_t(c)), out);
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  if (first_invalid_utf8(token) != kUtf8Valid) return std::nullopt;
  const Tables& t = tables();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const uint32_t cp = next_code_point(token, i);
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
    out += char(t.to_byte[cp]);
  }
  return out;
}

}  // namespace deltafin::tokenizer
