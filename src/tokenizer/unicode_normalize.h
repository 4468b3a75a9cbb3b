// Unicode normalization for tokenizer.json normalizers, through ICU.
#pragma once
#include <string>
#include <string_view>

#include "core/result.h"

namespace deltafin::tokenizer {

// NFC of valid UTF-8 text (ASCII is returned as is without calling ICU).
Result<std::string> nfc(std::string_view utf8);

}  // namespace deltafin::tokenizer
