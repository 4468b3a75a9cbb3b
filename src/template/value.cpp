#include "template/value.h"

#include <algorithm>
#include <cmath>

#include "template/text.h"

namespace deltafin::jinja {

void fail(std::string message) { throw TemplateError{std::move(message), 0}; }

Value Value::undefined(std::string why) {
  Value v;
  if (!why.empty()) v.s = std::make_shared<const std::string>(std::move(why));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind = Kind::Int;
  v.i = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind = Kind::Float;
  v.f = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.s = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::make_list(List l, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.tuple = tuple;
  for (const auto& x : l) v.depth = std::max(v.depth, x.depth);
  if (++v.depth > kMaxValueDepth) fail("lists and dicts nest deeper than " + std::to_string(kMaxValueDepth));
  v.list = std::make_shared<const List>(std::move(l));
  return v;
}
Value Value::make_dict(Dict d) {
  Value v;
  v.kind = Kind::Dict;
  for (const auto& [k, x] : d.items) v.depth = std::max({v.depth, k.depth, x.depth});
  if (++v.depth > kMaxValueDepth) fail("lists and dicts nest deeper than " + std::to_string(kMaxValueDepth));
  v.dict = std::make_shared<const Dict>(std::move(d));
  return v;
}

double Value::as_double() const {
  switch (kind) {
    case Kind::Float: return f;
    case Kind::Int: return s ? std::stod(*s) : static_cast<double>(i);
    case Kind::Bool: return b ? 1 : 0;
    default: fail("'" + type_name(*this) + "' is not a number");
  }
}
int64_t Value::as_int() const {
  if (kind == Kind::Int && s) fail("the integer " + *s + " is beyond 64 bits, which this interpreter computes with");
  return kind == Kind::Bool ? (b ? 1 : 0) : i;
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}
const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.kind == Value::Kind::String && k.str() == key) return &v;
  return nullptr;
}
void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items)
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* Namespace::find(std::string_view name) const {
  for (const auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}
void Namespace::set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs)
    if (k == name) {
      v = std::move(value);
      return;
    }
  attrs.emplace_back(name, std::move(value));
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Int: return v.i != 0 || v.s;
    case Value::Kind::Float: return v.f != 0;
    case Value::Kind::String: return !v.s->empty();
    case Value::Kind::List: return !v.list->empty();
    case Value::Kind::Dict: return !v.dict->items.empty();
    default: return true;
  }
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    const bool big_a = a.kind == K::Int && a.s, big_b = b.kind == K::Int && b.s;
    if (big_a || big_b) {
      if (big_a && big_b) return *a.s == *b.s;
      if (a.kind == K::Float || b.kind == K::Float) return a.as_double() == b.as_double();
      return false;
    }
    if (a.kind == K::Float || b.kind == K::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List: {
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case K::Dict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    }
    case K::Namespace: return a.ns == b.ns;
    case K::Callable: return a.fn == b.fn;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::Float || b.kind == Value::Kind::Float || (a.kind == Value::Kind::Int && a.s) ||
        (b.kind == Value::Kind::Int && b.s))
      return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list() && a.tuple == b.tuple) {
    const List& x = *a.list;
    const List& y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equal(x[k], y[k])) return less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) fail("comparison with an undefined value");
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return v.tuple ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return v.ns->is_loop ? "LoopContext" : "Namespace";
    case Value::Kind::Callable: return "function";
  }
  return "object";
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::String: return v.str();
    default: return repr(v);
  }
}

namespace {

std::string repr_at(const Value& v, int depth);

}  // namespace

std::string repr(const Value& v) { return repr_at(v, 0); }

namespace {

std::string repr_at(const Value& v, int depth) {
  // Namespaces can hold themselves or long chains of each other.
  if (depth > kMaxValueDepth) fail("a value nests too deeply to print");
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.b ? "True" : "False";
    case Value::Kind::Int: return v.s ? *v.s : std::to_string(v.i);
    case Value::Kind::Float: return py_float_repr(v.f);
    case Value::Kind::String: return py_str_repr(v.str());
    case Value::Kind::List: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr_at((*v.list)[k], depth + 1);
      }
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += repr_at(k, depth + 1) + ": " + repr_at(x, depth + 1);
      }
      return out + "}";
    }
    case Value::Kind::Namespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.ns->attrs) {
        if (!first) out += ", ";
        first = false;
        out += py_str_repr(k) + ": " + repr_at(x, depth + 1);
      }
      return out + "}>";
    }
    case Value::Kind::Callable: return "<function " + v.fn->name + ">";
  }
  return "";
}

}  // namespace

}  // namespace deltafin::jinja
