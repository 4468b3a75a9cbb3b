#include "template/template.h"

#include "template/builtins.h"
#include "template/interpreter.h"
#include "template/json.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace deltafin::jinja {

struct Template::Parsed {
  Body body;
};

Result<Template> Template::parse(std::string_view source, const Limits& limits) {
  DF_ASSIGN(auto tokens, lex(source));
  DF_ASSIGN(auto body, jinja::parse(tokens, limits.max_nesting));
  Template t;
  auto parsed = std::make_shared<Parsed>();
  parsed->body = std::move(body);
  t.parsed_ = std::move(parsed);
  t.limits_ = limits;
  return t;
}

Result<std::string> Template::render(const nlohmann::ordered_json& vars, const RenderOptions& options) const {
  if (!vars.is_object()) return error("chat template: the variables must be a JSON object");
  try {
    Dict globals = builtin_globals();
    for (const auto& [k, v] : vars.items()) globals.set(Value::string(k), from_json(v, limits_.max_nesting));
    Interpreter in(limits_, options, std::move(globals));
    return in.render(parsed_->body);
  } catch (const TemplateError& e) {
    if (e.line > 0) return error("chat template line {}: {}", e.line, e.message);
    return error("chat template: {}", e.message);
  } catch (const std::bad_alloc&) {
    return error("chat template: out of memory");
  }
}

}  // namespace deltafin::jinja
