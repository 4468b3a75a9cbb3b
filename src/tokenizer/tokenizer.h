// Deltafin's tiktoken-compatible tokenizer: a rank file, a pre-tokenisation
// pattern and special tokens (docs/design/tokenizer.md). Immutable after loading and safe to
// share between threads; copies share the loaded tables.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/json_bpe_model.h"
#include "tokenizer/pattern.h"
#include "tokenizer/rank_table.h"
#include "tokenizer/specials.h"

namespace deltafin::tokenizer {

struct TokenizerOptions {
  // K3's extra chunking before the pattern (docs/design/tokenizer.md): slices of 400,000
  // code points, then cuts inside runs of more than 25,000 same-class
  // (Python isspace) characters. On for checkpoints, off for plain tiktoken.
  bool kimi_chunking = false;
  // Inputs larger than this are split at safe points and encoded on threads.
  size_t parallel_threshold = 128 * 1024;
  size_t parallel_chunk = 64 * 1024;  // target bytes per parallel unit
  int threads = 0;                    // 0 = hardware concurrency; 1 = never parallel
};

class Tokenizer {
 public:
  static Result<Tokenizer> create(std::vector<std::string> ranks, const std::string& pattern,
                                  SpecialTokens specials, TokenizerOptions options = {});
  // A rank file plus optional pattern ("" = K3's) and special-token JSON.
  static Result<Tokenizer> load(const std::string& rank_file, const std::string& pattern,
                                const std::string& specials_json_path, TokenizerOptions options = {});
  // DIR/tokenizer.json if present (load_tokenizer_json), else
  // DIR/tiktoken.model + DIR/tokenizer_config.json (optional): 256 special
  // ids right after the ranks, K3 spellings from added_tokens_decoder, the
  // config's "pat_str" if present else K3's pattern, K3 chunking on.
  static Result<Tokenizer> load_from_checkpoint_dir(const std::string& dir);
  // A Hugging Face byte-level BPE tokenizer.json (json_bpe_model.h). Ids
  // 0..N-1 cover the vocab and the added tokens; specials() holds the added
  // tokens marked special. Encoding never adds BOS/EOS (post_processor).
  static Result<Tokenizer> load_tokenizer_json(const std::string& path);
  static Result<Tokenizer> from_tokenizer_json(std::string_view json, const std::string& name);
  // True when built from a tokenizer.json.
  bool is_tokenizer_json() const { return state_->json_model != nullptr; }

  // Text must be valid UTF-8 (else an error naming the byte offset). With
  // allow_special, spellings of special tokens become their ids; without,
  // they are ordinary text (user text never yields special ids).
  Result<std::vector<uint32_t>> encode(std::string_view text, bool allow_special = false) const;
  // Same result, never using threads (the reference for the parallel path).
  Result<std::vector<uint32_t>> encode_sequential(std::string_view text, bool allow_special = false) const;

  // Concatenated token bytes (specials as their spelling); error on unknown ids.
  Result<std::string> decode_bytes(const std::vector<uint32_t>& ids) const;
  // decode_bytes with invalid UTF-8 replaced by U+FFFD.
  Result<std::string> decode(const std::vector<uint32_t>& ids) const;
  // Bytes of one id, or an error for an unknown id.
  Result<std::string_view> token_bytes(uint32_t id) const;

  uint32_t rank_count() const { return static_cast<uint32_t>(state_->table.size()); }
  // One past the largest id (ranks and specials).
  uint32_t vocab_size() const;
  const SpecialTokens& specials() const { return state_->specials; }
  bool is_special(uint32_t id) const { return specials().spelling(id) != nullptr; }
  // Id of a special token spelling, or an error naming it.
  Result<uint32_t> special_id(std::string_view spelling) const;
  const Pattern& pattern() const { return *state_->pattern; }
  const TokenizerOptions& options() const { return state_->options; }

  // Pieces the pattern cuts `text` into (valid UTF-8), for tests and tools.
  Result<std::vector<std::string>> pretokenize(std::string_view text) const;

 private:
  struct State {
    RankTable table;
    std::shared_ptr<const Pattern> pattern;
    SpecialTokens specials;
    TokenizerOptions options;
    std::shared_ptr<const JsonBpeModel> json_model;  // set for tokenizer.json
  };
  struct Unit {  // an ordinary text span, or one special id
    size_t begin, end;
    int64_t special;
  };
  Result<std::vector<uint32_t>> encode_impl(std::string_view text, bool allow_special, bool parallel) const;
  std::vector<Unit> units(std::string_view text, bool allow_special) const;
  Status encode_ordinary(std::string_view text, std::vector<uint32_t>& out) const;
  std::shared_ptr<const State> state_;
};

}  // namespace deltafin::tokenizer
