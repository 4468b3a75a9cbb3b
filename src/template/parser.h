// Parses tokens into statements and expressions by Jinja's grammar and
// precedence. Anything outside the subset this interpreter runs fails here,
// naming the construct and its line, before anything renders.
#pragma once
#include <vector>

#include "core/result.h"
#include "template/ast.h"
#include "template/lexer.h"

namespace deltafin::jinja {

Result<Body> parse(const std::vector<Token>& tokens, int max_nesting);

}  // namespace deltafin::jinja
