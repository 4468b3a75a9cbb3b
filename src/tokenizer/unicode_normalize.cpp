#include "tokenizer/unicode_normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/utypes.h>

namespace deltafin::tokenizer {

Result<std::string> nfc(std::string_view utf8) {
  bool ascii = true;
  for (char c : utf8) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(utf8);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return error("NFC: ICU has no NFC data: {}", u_errorName(status));
  if (utf8.size() > 0x7FFFFFFF) return error("NFC: text of {} bytes is too large", utf8.size());
  const icu::StringPiece in(utf8.data(), static_cast<int32_t>(utf8.size()));
  if (n->isNormalizedUTF8(in, status) && U_SUCCESS(status)) return std::string(utf8);
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(utf8.size());
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, in, sink, nullptr, status);
  if (U_FAILURE(status)) return error("NFC: ICU failed: {}", u_errorName(status));
  return out;
}

}  // namespace deltafin::tokenizer
