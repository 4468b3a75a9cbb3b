#include "tokenizer/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

namespace deltafin::tokenizer {

const char* const kK3Pattern =
    R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// Unicode White_Space, which Rust's `\s` means (class body, no brackets).
constexpr std::string_view kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// ECMAScript's \s: WhiteSpace (with U+FEFF and category Zs) and LineTerminator.
constexpr std::string_view kJsWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF})";

// transformers.js rewrites this group (JavaScript had no inline modifiers)
// into an ASCII-only one; with (?i) PCRE2 would also fold e.g. U+017F into s.
constexpr std::string_view kCaselessContractions = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr std::string_view kAsciiContractions = "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))";

// Rust's regex reads a bare script name (\p{Han}) as Script, PCRE2 10.40+
// as Script_Extensions (which puts e.g. U+3001 in Han); pin Script.
std::string translate_property(std::string_view item) {
  // \uFFFF and \u{10FFFF} (Rust and JavaScript) are \x{...} to PCRE2.
  if (item.size() >= 3 && item[0] == '\\' && item[1] == 'u' && (item[2] != '{' || item.back() == '}')) {
    const std::string_view hex = item[2] == '{' ? item.substr(3, item.size() - 4) : item.substr(2);
    std::string out = "\\x{";
    out.append(hex).push_back('}');
    return out;
  }
  if (item.size() < 5 || (item[1] != 'p' && item[1] != 'P') || item[2] != '{') return std::string(item);
  const std::string_view name = item.substr(3, item.size() - 4);
  const bool general_category = name.size() <= 2 || name.find_first_of(":=") != std::string_view::npos ||
                                name == "Letter" || name == "Number" || name == "Mark" || name == "Punctuation" ||
                                name == "Symbol" || name == "Separator" || name == "Other" || name == "Any";
  if (general_category) return std::string(item);
  std::string out(item.substr(0, 3));
  out.append("sc:").append(name).append("}");
  return out;
}

// Reads one class item (escape or literal) starting at p; returns its end.
size_t escape_end(std::string_view s, size_t p) {
  if (s[p] != '\\' || p + 1 >= s.size()) return p + 1;
  const char c = s[p + 1];
  if ((c == 'p' || c == 'P' || c == 'x') && p + 2 < s.size() && s[p + 2] == '{') {
    const size_t close = s.find('}', p + 3);
    return close == std::string_view::npos ? s.size() : close + 1;
  }
  if (c == 'u' && p + 2 < s.size()) {
    if (s[p + 2] == '{') {
      const size_t close = s.find('}', p + 3);
      return close == std::string_view::npos ? s.size() : close + 1;
    }
    size_t e = p + 2;
    while (e < s.size() && e < p + 6 && std::isxdigit(static_cast<unsigned char>(s[e]))) ++e;
    if (e == p + 6) return e;
  }
  return p + 2;
}

// Translates a class body (between the brackets, no leading ^), expanding \s.
Result<std::string> translate_class_body(std::string_view body, std::string_view white_space) {
  std::string out;
  for (size_t p = 0; p < body.size();) {
    const size_t e = escape_end(body, p);
    const std::string_view item = body.substr(p, e - p);
    if (item == "\\s") out += white_space;
    else if (item == "\\S") return error("pattern: \\S inside a character class is not supported");
    else if (item == "[") return error("pattern: nested character class is not supported here");
    else out += translate_property(item);
    p = e;
  }
  return out;
}

// Finds the `]` closing the class that opens at s[open] ('['), honouring
// escapes and one level of nesting; npos if unbalanced.
size_t class_end(std::string_view s, size_t open) {
  size_t p = open + 1;
  if (p < s.size() && s[p] == '^') ++p;
  if (p < s.size() && s[p] == ']') ++p;  // literal ] first
  int depth = 1;
  while (p < s.size()) {
    if (s[p] == '\\') {
      p = escape_end(s, p);
      continue;
    }
    if (s[p] == '[') ++depth;
    if (s[p] == ']' && --depth == 0) return p;
    ++p;
  }
  return std::string_view::npos;
}

}  // namespace

Result<std::string> translate_pattern(std::string_view s, RegexDialect dialect) {
  const bool js = dialect == RegexDialect::kJavaScript;
  const std::string_view ws = js ? kJsWhiteSpace : kWhiteSpace;
  std::string out;
  for (size_t p = 0; p < s.size();) {
    if (js && s.substr(p, kCaselessContractions.size()) == kCaselessContractions) {
      out += kAsciiContractions;
      p += kCaselessContractions.size();
      continue;
    }
    if (s[p] == '\\') {
      const size_t e = escape_end(s, p);
      const std::string_view item = s.substr(p, e - p);
      if (item == "\\s" || item == "\\S") out.append(item[1] == 's' ? "[" : "[^").append(ws).append("]");
      else out += translate_property(item);
      p = e;
      continue;
    }
    if (js && s[p] == '.') {
      out += R"([^\n\r\x{2028}\x{2029}])";
      ++p;
      continue;
    }
    if (s[p] != '[') {
      out += s[p++];
      continue;
    }
    const size_t close = class_end(s, p);
    if (close == std::string_view::npos) return error("pattern: unbalanced '[' at offset {}", p);
    std::string_view inner = s.substr(p + 1, close - p - 1);
    const bool negated = !inner.empty() && inner[0] == '^';
    if (negated) inner.remove_prefix(1);
    const size_t amp = inner.find("&&");
    if (amp == std::string_view::npos) {
      DF_ASSIGN(std::string body, translate_class_body(inner, ws));
      out += negated ? "[^" : "[";
      out += body + "]";
    } else {
      // [A&&[^B]] -> (?:(?![B])[A]) ; [A&&[B]] -> (?:(?=[B])[A]).
      if (negated) return error("pattern: negated class intersection is not supported");
      std::string_view left = inner.substr(0, amp), right = inner.substr(amp + 2);
      if (right.size() < 2 || right.front() != '[' || right.back() != ']')
        return error("pattern: class intersection must have the form [A&&[B]]");
      right = right.substr(1, right.size() - 2);
      const bool right_neg = !right.empty() && right[0] == '^';
      if (right_neg) right.remove_prefix(1);
      DF_ASSIGN(std::string a, translate_class_body(left, ws));
      DF_ASSIGN(std::string b, translate_class_body(right, ws));
      out += right_neg ? "(?:(?![" : "(?:(?=[";
      out += b + "])[" + a + "])";
    }
    p = close + 1;
  }
  return out;
}

Result<std::shared_ptr<const Pattern>> Pattern::compile(const std::string& rust_pattern, RegexDialect dialect) {
  DF_ASSIGN(std::string translated, translate_pattern(rust_pattern, dialect));
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // JavaScript: \d \w \b are ASCII (no UCP) and $ matches only at the end.
  const uint32_t flags = dialect == RegexDialect::kJavaScript ? PCRE2_UTF | PCRE2_NO_UTF_CHECK | PCRE2_DOLLAR_ENDONLY
                                                              : PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), flags,
                                   &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return error("pattern: PCRE2 compile error at offset {}: {}", err_off, reinterpret_cast<char*>(buf));
  }
  std::shared_ptr<Pattern> p(new Pattern());
  p->source_ = rust_pattern;
  p->translated_ = std::move(translated);
  p->code_ = code;
  p->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  p->newline_split_safe_ = dialect == RegexDialect::kRust && (
      rust_pattern == kK3Pattern || rust_pattern == kCl100kPattern || rust_pattern == kO200kPattern);
  return std::shared_ptr<const Pattern>(std::move(p));
}

Pattern::~Pattern() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {
// Match data plus a JIT stack big enough for long whitespace runs, one set
// per thread and shared by all patterns: only the whole-match offsets are
// read, so one ovector pair suffices for any pattern.
struct MatchState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    md = pcre2_match_data_create(1, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    if (ctx && stack) pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_data_free(md);
    pcre2_match_context_free(ctx);
    if (stack) pcre2_jit_stack_free(stack);
  }
};
}  // namespace

Result<void*> Pattern::new_match_data() const {
  thread_local MatchState state;
  if (!state.md || !state.ctx) return error("pattern: out of memory creating PCRE2 match data");
  return static_cast<void*>(&state);
}

Result<bool> Pattern::match_at(std::string_view text, size_t start, void* state, size_t& begin,
                               size_t& end) const {
  auto* st = static_cast<MatchState*>(state);
  auto* code = static_cast<pcre2_code*>(code_);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, 0, st->md, st->ctx)
                : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, st->md, st->ctx);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) {
    // Retry with the interpreter, which keeps its backtracking on the heap.
    rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, st->md, st->ctx);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  // rc == 0: a match whose groups did not fit the one-pair ovector; fine.
  if (rc < 0) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(rc, buf, sizeof buf);
    return error("pattern: PCRE2 match error at byte {}: {}", start, reinterpret_cast<char*>(buf));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st->md);
  begin = ov[0];
  end = ov[1];
  return true;
}

}  // namespace deltafin::tokenizer
