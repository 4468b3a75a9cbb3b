#include "template/interpreter.h"

#include "template/builtins.h"

namespace deltafin::jinja {

namespace {

// Counts the interpreter's C++ recursion (expressions inside macro calls
// inside expressions...), so that no template can overflow the stack.
struct Descend {
  int& depth;
  Descend(int& d, int max) : depth(d) {
    if (++depth > max) {
      --depth;
      fail("the template's expressions and calls nest deeper than " + std::to_string(max));
    }
  }
  ~Descend() { --depth; }
};

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, x] : vars)
    if (k == name) {
      x = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

Interpreter::Interpreter(const Limits& limits, const RenderOptions& options, Dict globals)
    : limits_(limits), options_(options), globals_(std::move(globals)) {}

Interpreter::~Interpreter() {
  // A namespace can hold itself (set ns.me = ns); empty them all so that no
  // cycle of shared pointers outlives the render.
  for (auto& ns : namespaces_) ns->attrs.clear();
}

std::shared_ptr<Namespace> Interpreter::new_namespace() {
  namespaces_.push_back(std::make_shared<Namespace>());
  return namespaces_.back();
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    fail("the template ran more than " + std::to_string(limits_.max_steps) + " steps (a runaway loop?)");
}

void Interpreter::charge_bytes(size_t n) {
  bytes_ += n;
  if (bytes_ > limits_.max_bytes_built)
    fail("the template built more than " + std::to_string(limits_.max_bytes_built) + " bytes of values");
}

void Interpreter::check_string(size_t n) const {
  if (n > limits_.max_output_bytes)
    fail("the template built a string of more than " + std::to_string(limits_.max_output_bytes) + " bytes");
}

void Interpreter::check_items(size_t n) const {
  if (n > limits_.max_items)
    fail("the template built a list or dict of more than " + std::to_string(limits_.max_items) + " items");
}

void Interpreter::write(std::string& out, std::string_view s) {
  check_string(out.size() + s.size());
  charge_bytes(s.size());
  out.append(s);
}

std::string Interpreter::render(const Body& body) {
  auto top = std::make_shared<Scope>();
  std::string out;
  exec(body, top, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopeP& scope, std::string& out) {
  Descend guard(recursion_, limits_.max_recursion);
  for (const auto& n : body) {
    Flow f;
    try {
      f = exec_node(*n, scope, out);
    } catch (TemplateError& e) {
      if (e.line == 0) e.line = n->line;
      throw;
    }
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_node(const Node& n, const ScopeP& scope, std::string& out) {
  step();
  switch (n.kind) {
    case NodeKind::Text: write(out, n.text); return Flow::Normal;
    case NodeKind::Output: {
      const Value v = eval(*n.expr, scope);
      if (v.is_string()) {
        write(out, v.str());
      } else {
        const std::string s = to_str(v);
        write(out, s);
      }
      return Flow::Normal;
    }
    case NodeKind::If:
      for (const auto& [cond, body] : n.branches)
        if (!cond || truthy(eval(*cond, scope))) return exec(body, scope, out);
      return Flow::Normal;
    case NodeKind::For: exec_for(n, scope, out); return Flow::Normal;
    case NodeKind::Set: assign(n, scope, eval(*n.expr, scope)); return Flow::Normal;
    case NodeKind::SetBlock: {
      std::string captured;
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      exec(n.body, inner, captured);
      scope->set(n.targets[0], Value::string(std::move(captured)));
      return Flow::Normal;
    }
    case NodeKind::Macro: scope->set(n.name, make_macro(n, scope)); return Flow::Normal;
    case NodeKind::Break: return Flow::Break;
    case NodeKind::Continue: return Flow::Continue;
    case NodeKind::Block: return exec(n.body, scope, out);
  }
  return Flow::Normal;
}

namespace {

void bind_targets(Scope& s, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    s.set(targets[0], v);
    return;
  }
  const List items = iterate(v);
  if (!v.is_list() && !v.is_string()) fail("cannot unpack a non-sequence " + type_name(v));
  if (items.size() != targets.size())
    fail(items.size() < targets.size()
             ? "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                   std::to_string(items.size()) + ")"
             : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  for (size_t k = 0; k < targets.size(); ++k) s.set(targets[k], items[k]);
}

}  // namespace

void Interpreter::exec_for(const Node& n, const ScopeP& scope, std::string& out) {
  const Value iterable = eval(*n.expr, scope);
  if (!iterable.is_undefined() && !iterable.is_list() && !iterable.is_dict() && !iterable.is_string())
    fail("'" + type_name(iterable) + "' object is not iterable");
  List items = iterate(iterable);
  charge_bytes(items.size() * sizeof(Value));
  if (n.filter) {
    List kept;
    for (auto& item : items) {
      step();
      auto s = std::make_shared<Scope>();
      s->parent = scope;
      bind_targets(*s, n.targets, item);
      if (truthy(eval(*n.filter, s))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const auto length = static_cast<int64_t>(items.size());
  // One loop object per loop, advanced in place as Jinja's LoopContext is.
  auto loop = std::make_shared<Namespace>();
  loop->is_loop = true;
  for (const char* name : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0",
                           "previtem", "nextitem"})
    loop->attrs.emplace_back(name, Value());
  std::weak_ptr<Namespace> weak = loop;
  Value cycle;
  cycle.kind = Value::Kind::Callable;
  cycle.fn = std::make_shared<const Callable>(Callable{"loop.cycle", [weak](Interpreter&, CallArgs& a) -> Value {
    const auto l = weak.lock();
    if (!l) fail("loop.cycle() called after its loop ended");
    if (a.positional.empty()) fail("no items for cycling given");
    const auto k = static_cast<size_t>(l->attrs[1].second.i);
    return a.positional[k % a.positional.size()];
  }});
  loop->attrs.emplace_back("cycle", std::move(cycle));
  Value lv;
  lv.kind = Value::Kind::Namespace;
  lv.ns = loop;
  for (int64_t k = 0; k < length; ++k) {
    step();
    auto& at = loop->attrs;
    at[0].second = Value::integer(k + 1);
    at[1].second = Value::integer(k);
    at[2].second = Value::integer(length - k);
    at[3].second = Value::integer(length - k - 1);
    at[4].second = Value::boolean(k == 0);
    at[5].second = Value::boolean(k == length - 1);
    at[6].second = Value::integer(length);
    at[7].second = Value::integer(1);
    at[8].second = Value::integer(0);
    at[9].second = k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("there is no previous item");
    at[10].second =
        k + 1 < length ? items[static_cast<size_t>(k + 1)] : Value::undefined("there is no next item");
    auto s = std::make_shared<Scope>();
    s->parent = scope;
    bind_targets(*s, n.targets, items[static_cast<size_t>(k)]);
    s->set("loop", lv);
    if (exec(n.body, s, out) == Flow::Break) break;
  }
  if (length == 0 && !n.else_body.empty()) {
    auto s = std::make_shared<Scope>();
    s->parent = scope;
    exec(n.else_body, s, out);
  }
}

void Interpreter::assign(const Node& n, const ScopeP& scope, Value v) {
  if (n.attr_target) {
    const Value target = lookup(n.targets[0], scope);
    if (target.kind != Value::Kind::Namespace || target.ns->is_loop)
      fail("cannot assign attribute on non-namespace object '" + n.targets[0] + "'");
    target.ns->set(n.targets[1], std::move(v));
    return;
  }
  if (n.targets.size() == 1) {
    scope->set(n.targets[0], std::move(v));
    return;
  }
  bind_targets(*scope, n.targets, v);
}

Value Interpreter::lookup(const std::string& name, const ScopeP& scope) const {
  for (const Scope* s = scope.get(); s; s = s->parent.get())
    if (const Value* v = s->find(name)) return *v;
  if (const Value* v = globals_.find(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::make_macro(const Node& n, const ScopeP& scope) {
  // The macro reads its defining scope when called; a weak pointer, so that
  // a scope holding its own macro is no cycle.
  std::weak_ptr<Scope> where = scope;
  const Node* node = &n;
  Value v;
  v.kind = Value::Kind::Callable;
  v.fn = std::make_shared<const Callable>(Callable{
      "macro " + n.name, [this, where, node](Interpreter&, CallArgs& args) -> Value {
        auto parent = where.lock();
        if (!parent) fail("macro '" + node->name + "' called outside the block that defined it");
        if (depth_ >= limits_.max_call_depth)
          fail("macro calls nest deeper than " + std::to_string(limits_.max_call_depth) + " (unbounded recursion?)");
        if (args.positional.size() > node->params.size())
          fail("macro '" + node->name + "' takes not more than " + std::to_string(node->params.size()) +
               " argument(s)");
        auto s = std::make_shared<Scope>();
        s->parent = parent;
        std::vector<bool> bound(node->params.size(), false);
        for (size_t k = 0; k < args.positional.size(); ++k) {
          s->set(node->params[k].first, args.positional[k]);
          bound[k] = true;
        }
        for (auto& [key, value] : args.keyword) {
          size_t k = 0;
          while (k < node->params.size() && node->params[k].first != key) ++k;
          if (k == node->params.size()) fail("macro '" + node->name + "' takes no keyword argument '" + key + "'");
          if (bound[k]) fail("macro '" + node->name + "' got multiple values for argument '" + key + "'");
          s->set(key, value);
          bound[k] = true;
        }
        for (size_t k = 0; k < node->params.size(); ++k) {
          if (bound[k]) continue;
          const auto& [pname, def] = node->params[k];
          s->set(pname, def ? eval(*def, s) : Value::undefined("parameter '" + pname + "' was not provided"));
        }
        ++depth_;
        std::string out;
        try {
          exec(node->body, s, out);
        } catch (...) {
          --depth_;
          throw;
        }
        --depth_;
        return Value::string(std::move(out));
      }});
  return v;
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined())
    fail(callee.s ? *callee.s : std::string("an undefined value is not callable"));
  if (callee.kind != Value::Kind::Callable) fail("'" + type_name(callee) + "' object is not callable");
  return callee.fn->call(*this, args);
}

Value Interpreter::eval(const Expr& e, const ScopeP& scope) {
  step();
  Descend guard(recursion_, limits_.max_recursion);
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: return lookup(e.name, scope);
    case ExprKind::List:
    case ExprKind::Tuple: return eval_list(e, scope);
    case ExprKind::Dict: return eval_dict(e, scope);
    case ExprKind::Attr: return eval_attr(e, scope);
    case ExprKind::Item: return eval_item(e, scope);
    case ExprKind::Slice: return eval_slice(e, scope);
    case ExprKind::Call: return eval_call(e, scope);
    case ExprKind::Filter: return eval_filter(e, scope);
    case ExprKind::Test: return eval_test(e, scope);
    case ExprKind::Neg:
    case ExprKind::Pos: return eval_unary(e, scope);
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.a, scope)));
    case ExprKind::Binary: return eval_binary(e, scope);
    case ExprKind::Concat: return eval_concat(e, scope);
    case ExprKind::Compare: return eval_compare(e, scope);
    case ExprKind::And: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? eval(*e.b, scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? a : eval(*e.b, scope);
    }
    case ExprKind::Cond:
      if (truthy(eval(*e.a, scope))) return eval(*e.b, scope);
      return e.c ? eval(*e.c, scope) : Value::undefined("the condition was false and there is no else");
  }
  return Value::undefined();
}

// Each kind in its own function: eval's own frame stays small, which
// bounds the stack a deeply nested template needs.
Value Interpreter::eval_list(const Expr& e, const ScopeP& scope) {
  List l;
  l.reserve(e.items.size());
  for (const auto& x : e.items) l.push_back(eval(*x, scope));
  charge_bytes(l.size() * sizeof(Value));
  return Value::make_list(std::move(l), e.kind == ExprKind::Tuple);
}

Value Interpreter::eval_dict(const Expr& e, const ScopeP& scope) {
  Dict d;
  for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
    Value key = eval(*e.items[k], scope);
    if (key.kind == Value::Kind::List && !key.tuple) fail("unhashable type: 'list'");
    if (key.is_dict()) fail("unhashable type: 'dict'");
    d.set(std::move(key), eval(*e.items[k + 1], scope));
  }
  charge_bytes(d.items.size() * 2 * sizeof(Value));
  return Value::make_dict(std::move(d));
}

Value Interpreter::eval_attr(const Expr& e, const ScopeP& scope) {
  const Value obj = eval(*e.a, scope);
  if (obj.is_undefined()) fail(obj.s ? *obj.s : "'" + e.name + "' of an undefined value");
  return get_attr(*this, obj, e.name);
}

Value Interpreter::eval_item(const Expr& e, const ScopeP& scope) {
  const Value obj = eval(*e.a, scope);
  const Value key = eval(*e.b, scope);
  if (obj.is_undefined()) fail(obj.s ? *obj.s : "subscript of an undefined value");
  return get_item(*this, obj, key);
}

Value Interpreter::eval_slice(const Expr& e, const ScopeP& scope) {
  const Value obj = eval(*e.a, scope);
  Value parts[3];
  for (int k = 0; k < 3; ++k) parts[k] = e.items[k] ? eval(*e.items[k], scope) : Value::none();
  if (obj.is_undefined()) fail(obj.s ? *obj.s : "slice of an undefined value");
  return slice(*this, obj, parts[0], parts[1], parts[2]);
}

Value Interpreter::eval_call(const Expr& e, const ScopeP& scope) {
  const Value callee = eval(*e.a, scope);
  CallArgs args;
  for (const auto& x : e.items) args.positional.push_back(eval(*x, scope));
  for (const auto& [k, x] : e.kwargs) args.keyword.emplace_back(k, eval(*x, scope));
  return call(callee, args);
}

Value Interpreter::eval_filter(const Expr& e, const ScopeP& scope) {
  const Value v = eval(*e.a, scope);
  CallArgs args;
  for (const auto& x : e.items) args.positional.push_back(eval(*x, scope));
  for (const auto& [k, x] : e.kwargs) args.keyword.emplace_back(k, eval(*x, scope));
  return apply_filter(*this, e.name, v, args);
}

Value Interpreter::eval_test(const Expr& e, const ScopeP& scope) {
  const Value v = eval(*e.a, scope);
  CallArgs args;
  for (const auto& x : e.items) args.positional.push_back(eval(*x, scope));
  for (const auto& [k, x] : e.kwargs) args.keyword.emplace_back(k, eval(*x, scope));
  return Value::boolean(apply_test(*this, e.name, v, args) != e.negated);
}

Value Interpreter::eval_unary(const Expr& e, const ScopeP& scope) {
  const Value v = eval(*e.a, scope);
  if (v.is_undefined()) fail(v.s ? *v.s : "arithmetic on an undefined value");
  if (!v.is_number()) fail("bad operand type for unary " + std::string(e.kind == ExprKind::Neg ? "-" : "+") +
                           ": '" + type_name(v) + "'");
  if (v.kind == Value::Kind::Float) return Value::number(e.kind == ExprKind::Neg ? -v.f : v.f);
  const int64_t i = v.as_int();
  if (e.kind == ExprKind::Pos) return Value::integer(i);
  if (i == INT64_MIN) fail("integer overflow");
  return Value::integer(-i);
}

Value Interpreter::eval_binary(const Expr& e, const ScopeP& scope) {
  const Value a = eval(*e.a, scope);
  const Value b = eval(*e.b, scope);
  return binary_op(*this, e.name, a, b);
}

Value Interpreter::eval_concat(const Expr& e, const ScopeP& scope) {
  std::string s;
  for (const auto& x : e.items) {
    const Value v = eval(*x, scope);
    const std::string part = to_str(v);
    check_string(s.size() + part.size());
    s += part;
  }
  charge_bytes(s.size());
  return Value::string(std::move(s));
}

Value Interpreter::eval_compare(const Expr& e, const ScopeP& scope) {
  Value left = eval(*e.items[0], scope);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.items[k + 1], scope);
    if (!compare(e.ops[k], left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace deltafin::jinja
