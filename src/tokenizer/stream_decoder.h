// Incremental decoding for streamed generation: bytes of a UTF-8 character
// split across tokens are held back until complete, so every chunk handed
// out is valid UTF-8 and the chunks concatenate to Tokenizer::decode(ids).
#pragma once
#include <string>

#include "tokenizer/tokenizer.h"

namespace deltafin::tokenizer {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Text that became complete with this token (possibly empty).
  Result<std::string> push(uint32_t id);
  // Whatever is still held back, invalid bytes as U+FFFD; resets the state.
  std::string finish();

 private:
  Tokenizer tokenizer_;
  std::string pending_;
};

}  // namespace deltafin::tokenizer
