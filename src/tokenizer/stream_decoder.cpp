#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace deltafin::tokenizer {

Result<std::string> StreamDecoder::push(uint32_t id) {
  DF_ASSIGN(std::string_view bytes, tokenizer_.token_bytes(id));
  pending_ += bytes;
  const size_t n = complete_prefix_length(pending_);
  std::string out = to_valid_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace deltafin::tokenizer
