// Hugging Face tokenizer.json, byte-level BPE flavour (GPT-2, Qwen, Llama 3
// style): parsed and validated into plain data. Anything this reader does not
// implement exactly is refused with an error naming the field, never ignored.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deltafin::tokenizer {

struct TokenizerJsonAddedToken {
  uint32_t id = 0;
  std::string content;
  bool special = false;     // matched only when special tokens are allowed
  bool normalized = false;  // matched in the normalized text (else the raw text)
};

struct TokenizerJsonSpec {
  bool nfc = false;  // normalizer: NFC (else none)
  // Split pre-tokenizers, in order, each with behavior Isolated; regexes in
  // the JavaScript dialect (as transformers.js reads them). ByteLevel with
  // use_regex adds GPT-2's pattern here.
  std::vector<std::string> splits;
  // bytes[id]: what each id decodes to, for ids 0..N-1 (vocab and added
  // tokens together, no gaps).
  std::vector<std::string> bytes;
  // Ids whose vocab string is spelled in the byte-level alphabet (only these
  // can come out of BPE); parallel to `bytes`.
  std::vector<bool> byte_level;
  // Merges in priority order (index = merge rank): left + right -> result.
  struct Merge {
    uint32_t left, right, result;
  };
  std::vector<Merge> merges;
  bool ignore_merges = false;  // a piece that is a vocab token is taken whole
  std::vector<TokenizerJsonAddedToken> added;
};

// `name` prefixes error messages (usually the file path).
Result<TokenizerJsonSpec> parse_tokenizer_json(std::string_view json, const std::string& name);

}  // namespace deltafin::tokenizer
