// Splits a template into text and the tokens of its tags, with Jinja's
// whitespace control as transformers configures it: `{%-`/`-%}` strip all
// whitespace on that side, trim_blocks drops the newline after a block or
// comment tag, lstrip_blocks drops the spaces and tabs before one on its
// line (`{%+` keeps them, `+%}` keeps the newline), and one trailing newline
// of the template is dropped.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deltafin::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok type;
  std::string text;  // Text: the text; Name/Op: its spelling; String: the decoded value; Int/Float: digits
  int line;
};

Result<std::vector<Token>> lex(std::string_view source);

}  // namespace deltafin::jinja
