// Runs a parsed template over its variables: Jinja's scoping (a for loop's
// body gets a fresh scope each iteration; macros see their own arguments, then
// the scopes where they were defined, read when called), Python's semantics
// for operators, and the limits that keep a hostile template bounded.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/template.h"
#include "template/value.h"

namespace deltafin::jinja {

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value v);
};
using ScopeP = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(const Limits& limits, const RenderOptions& options, Dict globals);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  std::string render(const Body& body);

  // Budgets: every evaluation step, every byte or item built.
  void step();
  void charge_bytes(size_t n);
  // Fails if a string of n bytes or a list of n items would pass the limits.
  void check_string(size_t n) const;
  void check_items(size_t n) const;
  Value call(const Value& callee, CallArgs& args);
  // namespace(): tracked, so that the render can empty them all at its end.
  std::shared_ptr<Namespace> new_namespace();
  const RenderOptions& options() const { return options_; }
  const Limits& limits() const { return limits_; }

 private:
  enum class Flow { Normal, Break, Continue };
  const Limits& limits_;
  const RenderOptions& options_;
  Dict globals_;
  uint64_t steps_ = 0;
  uint64_t bytes_ = 0;
  int depth_ = 0;      // macro calls
  int recursion_ = 0;  // eval and exec frames
  std::vector<std::shared_ptr<Namespace>> namespaces_;

  Flow exec(const Body& body, const ScopeP& scope, std::string& out);
  Flow exec_node(const Node& n, const ScopeP& scope, std::string& out);
  void exec_for(const Node& n, const ScopeP& scope, std::string& out);
  void assign(const Node& n, const ScopeP& scope, Value v);
  void write(std::string& out, std::string_view s);
  Value eval(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_list(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_dict(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_attr(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_item(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_slice(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_call(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_filter(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_test(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_unary(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_binary(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_concat(const Expr& e, const ScopeP& scope);
  [[gnu::noinline]] Value eval_compare(const Expr& e, const ScopeP& scope);
  Value lookup(const std::string& name, const ScopeP& scope) const;
  Value make_macro(const Node& n, const ScopeP& scope);
};

}  // namespace deltafin::jinja
