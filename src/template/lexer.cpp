#include "template/lexer.h"

#include <cstdlib>

#include "template/text.h"

namespace deltafin::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The length of the whitespace (Python's \\s, Unicode included) at s[pos].
size_t space_at(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return is_py_space(c) ? 1 : 0;
  const size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  const std::u32string u = decode_utf8(s.substr(pos, n));
  return u.size() == 1 && is_py_space(u[0]) ? n : 0;
}

// After `-%}`: all whitespace, as the regex `-%}\\s*`; counts the lines skipped.
size_t skip_space(std::string_view s, size_t pos, int& line) {
  while (size_t n = space_at(s, pos)) {
    line += s[pos] == '\n';
    pos += n;
  }
  return pos;
}

// Python's str.rstrip() of the text before a `{%-`.
std::string rstrip_all(std::string_view s) { return py_strip(s, false, true, nullptr); }

// A string literal's escapes, as Python's unicode-escape decodes them.
bool decode_string(std::string_view body, std::string& out) {
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    const char e = body[++i];
    auto hex = [&](size_t n) -> bool {
      if (i + n >= body.size()) return false;
      char32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        const char h = body[i + k];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= static_cast<char32_t>(h - '0');
        else if (h >= 'a' && h <= 'f') v |= static_cast<char32_t>(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= static_cast<char32_t>(h - 'A' + 10);
        else return false;
      }
      if (v > 0x10FFFF) return false;
      append_utf8(out, v);
      i += n;
      return true;
    };
    switch (e) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'v': out.push_back('\v'); break;
      case '0': out.push_back('\0'); break;
      case '\n': break;
      case 'x': if (!hex(2)) return false; break;
      case 'u': if (!hex(4)) return false; break;
      case 'U': if (!hex(8)) return false; break;
      default: out.push_back('\\'); out.push_back(e);
    }
  }
  return true;
}

const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")",
                            "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};

}  // namespace

Result<std::vector<Token>> lex(std::string_view raw) {
  // Newlines normalised to \n, and one trailing newline dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      src.push_back(raw[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();

  std::vector<Token> out;
  int line = 1;
  size_t pos = 0;
  bool line_starting = true;
  auto count_lines = [](std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
  };
  while (pos < src.size()) {
    size_t start = pos;
    while (true) {
      start = src.find('{', start);
      if (start == std::string::npos || start + 1 >= src.size()) {
        start = std::string::npos;
        break;
      }
      const char k = src[start + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++start;
    }
    if (start == std::string::npos) {
      out.push_back({Tok::Text, src.substr(pos), line});
      break;
    }
    const char kind = src[start + 1];
    const char sign = start + 2 < src.size() && (src[start + 2] == '-' || src[start + 2] == '+') ? src[start + 2] : 0;
    std::string text = src.substr(pos, start - pos);
    const int text_lines = count_lines(text);
    if (sign == '-') {
      text = rstrip_all(text);
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: only spaces before the tag on its line.
      const size_t l = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((l > 0 || line_starting) && l < text.size()) {
        // Only whitespace (Python's \\s) between the line start and the tag.
        size_t k = l;
        while (size_t n = space_at(text, k)) k += n;
        if (k == text.size()) text.resize(l);
      }
    }
    if (!text.empty()) out.push_back({Tok::Text, text, line});
    line += text_lines;
    size_t p = start + 2 + (sign ? 1 : 0);

    if (kind == '#') {
      const size_t end = src.find("#}", p);
      if (end == std::string::npos) return error("template line {}: missing end of comment tag", line);
      line += count_lines(std::string_view(src).substr(p, end - p));
      size_t after = end + 2;
      const char before = end > p ? src[end - 1] : 0;
      if (before == '-') {
        after = skip_space(src, after, line);
      } else if (before != '+' && after < src.size() && src[after] == '\n') {
        ++after;
        ++line;
      }
      line_starting = src[after - 1] == '\n';
      pos = after;
      continue;
    }

    // {% raw %} ... {% endraw %}: the text inside is not parsed.
    if (kind == '%') {
      size_t q = p;
      while (q < src.size() && is_space(src[q])) ++q;
      if (src.compare(q, 3, "raw") == 0 && (q + 3 >= src.size() || !is_name_start(src[q + 3]))) {
        return error("template line {}: unsupported construct: the raw block", line);
      }
    }

    out.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line});
    std::vector<char> balance;
    bool closed = false;
    while (p < src.size()) {
      const char c = src[p];
      if (is_space(c)) {
        line += c == '\n';
        ++p;
        continue;
      }
      if (balance.empty()) {
        // The end of the tag, with its whitespace control.
        const std::string_view rest = std::string_view(src).substr(p);
        const std::string_view close = kind == '{' ? "}}" : "%}";
        const bool minus = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close;
        const bool plus = kind == '%' && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == close;
        if (minus || plus || rest.substr(0, 2) == close) {
          size_t after = p + (minus || plus ? 3 : 2);
          if (minus) {
            after = skip_space(src, after, line);
          } else if (!plus && kind == '%' && after < src.size() && src[after] == '\n') {
            ++after;
            ++line;
          }
          out.push_back({kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", line});
          line_starting = src[after - 1] == '\n';
          pos = after;
          closed = true;
          break;
        }
      }
      if (is_name_start(c)) {
        size_t e = p;
        while (e < src.size() && (is_name_start(src[e]) || is_digit(src[e]))) ++e;
        out.push_back({Tok::Name, src.substr(p, e - p), line});
        p = e;
        continue;
      }
      if (is_digit(c)) {
        size_t e = p;
        auto digits = [&] {
          while (e < src.size() && (is_digit(src[e]) || (src[e] == '_' && e + 1 < src.size() && is_digit(src[e + 1]))))
            ++e;
        };
        digits();
        bool is_float = false;
        if (e + 1 < src.size() && src[e] == '.' && is_digit(src[e + 1])) {
          ++e;
          digits();
          is_float = true;
        }
        if (e < src.size() && (src[e] == 'e' || src[e] == 'E')) {
          size_t f = e + 1;
          if (f < src.size() && (src[f] == '+' || src[f] == '-')) ++f;
          if (f < src.size() && is_digit(src[f])) {
            e = f;
            digits();
            is_float = true;
          }
        }
        std::string num;
        for (size_t k = p; k < e; ++k)
          if (src[k] != '_') num.push_back(src[k]);
        out.push_back({is_float ? Tok::Float : Tok::Int, num, line});
        p = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < src.size() && src[e] != c) e += src[e] == '\\' ? 2 : 1;
        if (e >= src.size()) return error("template line {}: unterminated string", line);
        std::string value;
        if (!decode_string(std::string_view(src).substr(p + 1, e - p - 1), value))
          return error("template line {}: bad escape in a string", line);
        out.push_back({Tok::String, value, line});
        line += count_lines(std::string_view(src).substr(p, e - p));
        p = e + 1;
        continue;
      }
      std::string op;
      for (const char* o : kOps)
        if (src.compare(p, std::char_traits<char>::length(o), o) == 0) {
          op = o;
          break;
        }
      if (op.empty()) return error("template line {}: unexpected character '{}'", line, c);
      if (op == "(" || op == "[" || op == "{") balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      if (op == ")" || op == "]" || op == "}") {
        if (balance.empty() || balance.back() != op[0]) return error("template line {}: unexpected '{}'", line, op);
        balance.pop_back();
      }
      out.push_back({Tok::Op, op, line});
      p += op.size();
    }
    if (!closed) return error("template line {}: unexpected end of template inside a tag", line);
  }
  out.push_back({Tok::End, "", line});
  return out;
}

}  // namespace deltafin::jinja
