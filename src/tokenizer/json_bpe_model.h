// The encoder of a Hugging Face byte-level BPE tokenizer.json: added tokens,
// then NFC, then the Split pre-tokenizers, then ByteLevel and pair-priority
// BPE. Tokenizer (tokenizer.h) wraps it; this class holds only the steps
// that differ from tiktoken.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/pair_merges.h"
#include "tokenizer/pattern.h"
#include "tokenizer/rank_table.h"
#include "tokenizer/tokenizer_json.h"

namespace deltafin::tokenizer {

class JsonBpeModel {
 public:
  static Result<std::shared_ptr<const JsonBpeModel>> create(const TokenizerJsonSpec& spec);

  // Appends the ids of valid UTF-8 `text`. Non-special added tokens are
  // always matched; special ones only with `allow_special`.
  Status encode(std::string_view text, bool allow_special, std::vector<uint32_t>& out) const;
  // The pieces BPE sees for `text` (normalized, split; no added tokens).
  Result<std::vector<std::string>> pretokenize(std::string_view text) const;
  // The first Split pattern, or one that keeps the text whole.
  const std::shared_ptr<const Pattern>& main_pattern() const { return main_pattern_; }

 private:
  JsonBpeModel() = default;
  Status encode_section(std::string_view raw, bool allow_special, std::vector<uint32_t>& out) const;
  Status encode_normalized(std::string_view text, std::vector<uint32_t>& out) const;
  Status split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const;
  void encode_piece(std::string_view piece, std::vector<uint32_t>& out) const;

  bool nfc_ = false;
  std::vector<std::shared_ptr<const Pattern>> splits_;
  std::shared_ptr<const Pattern> main_pattern_;
  AddedTokenMatcher raw_added_, normalized_added_;
  PairMerges merges_;
  uint32_t byte_id_[256] = {};
  bool ignore_merges_ = false;
  RankTable whole_;  // byte-level vocab tokens by bytes, for ignore_merges
  std::vector<uint32_t> whole_ids_;
};

}  // namespace deltafin::tokenizer
