// The pre-tokenisation pattern, as data: a regex in the Rust-regex dialect
// that tiktoken uses, translated to PCRE2 (UTF + UCP, JIT) and iterated
// leftmost-first over the text. Each match is one BPE piece.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deltafin::tokenizer {

// K3's pattern exactly as published (docs/design/tokenizer.md), with `&&` intersections.
extern const char* const kK3Pattern;
extern const char* const kCl100kPattern;
extern const char* const kO200kPattern;

// The regex dialect a pattern is written in. tiktoken and K3 use Rust's
// regex crate; Hugging Face tokenizer.json Split patterns are read as
// JavaScript (`u` flag) regexes, as transformers.js does, the oracle of the
// tokenizer.json tests (tests/e2e/tokenizer_json_oracle.sh).
enum class RegexDialect { kRust, kJavaScript };

// Rewrites the constructs PCRE2 reads differently: class intersections
// `[A&&[^B]]` become `(?:(?![B])[A])`, and `\s`/`\S` become explicit classes
// (Rust: Unicode White_Space, as PCRE2's UCP \s also matches U+180E;
// JavaScript: ECMAScript WhiteSpace + LineTerminator, which has U+FEFF and
// not U+0085). JavaScript also gets an ASCII-only `(?i:'s|'t|...)`
// contraction group (transformers.js's rewrite of it) and `.` that stops at
// CR, LF, U+2028 and U+2029.
Result<std::string> translate_pattern(std::string_view pattern, RegexDialect dialect = RegexDialect::kRust);

class Pattern {
 public:
  // Compiles `pattern` (translated first). JavaScript patterns are compiled
  // without PCRE2_UCP, so \d, \w and \b stay ASCII as in JavaScript.
  static Result<std::shared_ptr<const Pattern>> compile(const std::string& pattern,
                                                        RegexDialect dialect = RegexDialect::kRust);
  ~Pattern();
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  const std::string& source() const { return source_; }
  const std::string& translated() const { return translated_; }
  // True for built-in patterns for which splitting right after "\n" before a
  // non-whitespace character provably cannot change the matches (see
  // docs/design/tokenizer.md); only those take the parallel path.
  bool newline_split_safe() const { return newline_split_safe_; }

  // Calls on_piece(begin, end) for each match in `text` (valid UTF-8).
  // Characters no alternative matches are skipped, as tiktoken does.
  template <typename F>
  Status for_each_match(std::string_view text, F&& on_piece) const;

  // Hugging Face's Split with behavior "Isolated", as transformers.js's
  // regexSplit does it: every match is a piece and so is every non-empty gap
  // between matches; an empty match only marks a cut.
  template <typename F>
  Status for_each_isolated(std::string_view text, F&& on_piece) const;

 private:
  Pattern() = default;
  // Next match at or after `start`; returns false at the end.
  Result<bool> match_at(std::string_view text, size_t start, void* match_data, size_t& begin,
                        size_t& end) const;
  // This thread's PCRE2 match state (not re-entrant: on_piece must not match).
  Result<void*> new_match_data() const;

  std::string source_, translated_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
  bool newline_split_safe_ = false;
};

template <typename F>
Status Pattern::for_each_match(std::string_view text, F&& on_piece) const {
  DF_ASSIGN(void* md, new_match_data());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t b = 0, e = 0;
    auto found = match_at(text, pos, md, b, e);
    if (!found.ok()) return found.status();
    if (!found.value()) break;
    if (e == b) {  // empty match: step one character, as find_iter does
      pos = e + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    on_piece(b, e);
    pos = e;
  }
  return Status();
}

template <typename F>
Status Pattern::for_each_isolated(std::string_view text, F&& on_piece) const {
  DF_ASSIGN(void* md, new_match_data());
  size_t pos = 0, prev = 0;
  while (pos <= text.size()) {
    size_t b = 0, e = 0;
    auto found = match_at(text, pos, md, b, e);
    if (!found.ok()) return found.status();
    if (!found.value()) break;
    if (b > prev) on_piece(prev, b);
    if (e > b) on_piece(b, e);
    prev = e;
    if (e == b) {  // empty match: step one character, as matchAll does
      if (e >= text.size()) break;
      pos = e + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    } else {
      pos = e;
    }
  }
  if (prev < text.size()) on_piece(prev, text.size());
  return Status();
}

}  // namespace deltafin::tokenizer
