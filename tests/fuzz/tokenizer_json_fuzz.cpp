// libFuzzer target: the tokenizer.json reader (src/tokenizer/tokenizer_json.cpp)
// and, for inputs it accepts, encoding and decoding with the result. Any
// input must give a tokenizer or an error value: never a crash, a sanitizer
// report or a hang. Built and run by tests/fuzz/fuzz_lib.sh (tests/e2e/fuzz_parsers.sh,
// tests/fuzz/tokenizer_json_fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using deltafin::tokenizer::Tokenizer;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = Tokenizer::from_tokenizer_json(text, "fuzz");
  if (!tok.ok()) return 0;
  for (const char* s : {"", "Hello, world! 123", "e\xCC\x81 <think> <|im_end|> \xF0\x9F\x98\x80\n\n  x",
                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    for (bool special : {false, true}) {
      auto ids = tok->encode(s, special);
      if (ids.ok()) (void)tok->decode(*ids);
    }
  }
  (void)tok->decode({0, 1, 2, tok->vocab_size() - 1, tok->vocab_size()});
  return 0;
}
