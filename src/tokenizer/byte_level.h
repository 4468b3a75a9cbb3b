// GPT-2's byte-level alphabet, used by Hugging Face "ByteLevel" tokenizers:
// each of the 256 bytes is spelled as one printable character (printable
// Latin-1 bytes as themselves, the rest as U+0100 onwards) so that BPE
// vocabularies are strings without spaces or control characters.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deltafin::tokenizer {

// The code point that spells byte `b`.
uint32_t byte_level_char(uint8_t b);
// `bytes` spelled in the byte-level alphabet (UTF-8).
std::string byte_level_encode(std::string_view bytes);
// The bytes a vocabulary string spells, or nullopt if a character of it is
// not in the alphabet (or it is not valid UTF-8).
std::optional<std::string> byte_level_decode(std::string_view token);

}  // namespace deltafin::tokenizer
