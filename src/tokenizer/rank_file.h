// tiktoken rank files: one "<base64 of token bytes> <rank>" per line, ranks
// 0..n-1 in file order (docs/design/tokenizer.md). Parsing is strict so that a corrupt file
// is an error naming its line, never a silently different vocabulary.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deltafin::tokenizer {

// Strict RFC 4648 base64 with padding; nullopt on any malformed input.
std::optional<std::string> decode_base64(std::string_view text);
std::string encode_base64(std::string_view bytes);

// Token byte strings indexed by rank. `name` is used in error messages.
Result<std::vector<std::string>> parse_rank_file(std::string_view contents, const std::string& name);
Result<std::vector<std::string>> read_rank_file(const std::string& path);

}  // namespace deltafin::tokenizer
