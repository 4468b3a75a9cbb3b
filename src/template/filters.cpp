// Jinja's built-in filters and tests that chat templates use, with
// transformers' tojson (json.dumps, ensure_ascii=False by default).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "template/builtins.h"
#include "template/json.h"
#include "template/text.h"

namespace deltafin::jinja {

namespace {

const std::set<std::string, std::less<>>& filter_names() {
  static const std::set<std::string, std::less<>> k = {
      "abs", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float", "indent", "int",
      "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
      "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim",
      "unique", "upper", "wordcount"};
  return k;
}

const std::set<std::string, std::less<>>& test_names() {
  static const std::set<std::string, std::less<>> k = {
      "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped",
      "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan",
      "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true",
      "undefined", "upper"};
  return k;
}

bool is_int_like(const Value& v) { return v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool; }

// attribute="a.b.0" as Jinja's make_attrgetter reads it.
Value get_path(Interpreter& in, const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_undefined()) fail(cur.s ? *cur.s : "attribute of an undefined value");
    cur = digits ? get_item(in, cur, Value::integer(std::atoll(part.c_str()))) : get_item(in, cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

std::string attribute_arg(const std::optional<Value>& a) {
  if (!a || a->is_none()) return {};
  if (is_int_like(*a)) return std::to_string(a->as_int());
  if (!a->is_string()) fail("attribute= must be a string");
  return a->str();
}

// The sort key of Jinja's ignore_case: strings lowered.
Value fold(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  std::string s = v.str();
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return Value::string(std::move(s));
}

bool want_bool(const std::optional<Value>& v, bool def) { return v ? truthy(*v) : def; }

CallArgs rest_args(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t k = from; k < a.positional.size(); ++k) r.positional.push_back(a.positional[k]);
  r.keyword = a.keyword;
  return r;
}

Value to_int(const Value& v, const Value& def, int64_t base) {
  switch (v.kind) {
    case Value::Kind::Int: return v;
    case Value::Kind::Bool: return Value::integer(v.b);
    case Value::Kind::Float:
      if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return def;
      return Value::integer(static_cast<int64_t>(v.f));
    case Value::Kind::String: {
      const std::string s = py_strip(v.str(), true, true, nullptr);
      std::string digits;
      for (char c : s)
        if (c != '_') digits.push_back(c);
      if (!digits.empty()) {
        char* end = nullptr;
        errno = 0;
        const long long i = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
        if (errno == 0 && end && *end == 0) return Value::integer(i);
        const double f = std::strtod(digits.c_str(), &end);
        if (end && *end == 0 && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value::integer(static_cast<int64_t>(f));
      }
      return def;
    }
    default: return def;
  }
}

}  // namespace

bool has_filter(std::string_view name) { return filter_names().count(name) > 0; }
bool has_test(std::string_view name) { return test_names().count(name) > 0; }

Value apply_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  const std::string what = "the filter '" + name + "'";
  auto str_of = [&](const Value& x) { return to_str(x); };
  if (name == "default" || name == "d") {
    no_more_args(a, 2, {"default_value", "boolean"}, what);
    const bool boolean = want_bool(arg(a, 1, "boolean"), false);
    if (v.is_undefined() || (boolean && !truthy(v))) return arg(a, 0, "default_value").value_or(Value::string(""));
    return v;
  }
  if (name == "tojson") {
    // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
    no_more_args(a, 4, {"ensure_ascii", "indent", "separators", "sort_keys"}, what);
    DumpOptions o;
    o.ensure_ascii = want_bool(arg(a, 0, "ensure_ascii"), false);
    o.sort_keys = want_bool(arg(a, 3, "sort_keys"), false);
    const auto indent = arg(a, 1, "indent");
    if (indent && !indent->is_none()) {
      if (is_int_like(*indent)) o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(indent->as_int(), 1024))), ' ');
      else if (indent->is_string()) o.indent = indent->str();
      else fail("tojson: indent must be an integer or a string");
      o.item_separator = ",";
    }
    const auto sep = arg(a, 2, "separators");
    if (sep && !sep->is_none()) {
      if (!sep->is_list() || sep->list->size() != 2 || !(*sep->list)[0].is_string() || !(*sep->list)[1].is_string())
        fail("tojson: separators must be a pair of strings");
      o.item_separator = (*sep->list)[0].str();
      o.key_separator = (*sep->list)[1].str();
    }
    std::string out = dumps(v, o);
    in.check_string(out.size());
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (name == "length" || name == "count") {
    no_more_args(a, 0, {}, what);
    switch (v.kind) {
      case Value::Kind::Undefined: return Value::integer(0);
      case Value::Kind::String: return Value::integer(static_cast<int64_t>(count_code_points(v.str())));
      case Value::Kind::List: return Value::integer(static_cast<int64_t>(v.list->size()));
      case Value::Kind::Dict: return Value::integer(static_cast<int64_t>(v.dict->items.size()));
      default: fail("object of type '" + type_name(v) + "' has no len()");
    }
  }
  if (name == "string" || name == "safe" || name == "escape" || name == "e") {
    no_more_args(a, 0, {}, what);
    std::string s = str_of(v);
    if (name == "escape" || name == "e") {
      std::string out;
      for (char c : s) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out.push_back(c);
        }
      }
      s = std::move(out);
    }
    if (v.is_string() && name != "escape" && name != "e") return v;
    in.check_string(s.size());
    in.charge_bytes(s.size());
    return Value::string(std::move(s));
  }
  if (name == "trim") {
    no_more_args(a, 1, {"chars"}, what);
    const auto chars = arg(a, 0, "chars");
    std::string c;
    if (chars && !chars->is_none()) c = str_of(*chars);
    return Value::string(py_strip(str_of(v), true, true, chars && !chars->is_none() ? &c : nullptr));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "replace") {
    CallArgs args = a;
    return get_attr(in, Value::string(str_of(v)), name).fn->call(in, args);
  }
  if (name == "join") {
    no_more_args(a, 2, {"d", "attribute"}, what);
    const auto d = arg(a, 0, "d");
    const std::string sep = d ? str_of(*d) : "";
    const std::string attr = attribute_arg(arg(a, 1, "attribute"));
    std::string out;
    bool first = true;
    for (const auto& x : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += str_of(attr.empty() ? x : get_path(in, x, attr));
      in.check_string(out.size());
    }
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (name == "first" || name == "last") {
    no_more_args(a, 0, {}, what);
    if (v.is_dict() && name == "last") fail("last: a dict cannot be reversed here");
    const List items = iterate(v);
    if (items.empty()) return Value::undefined(name == "first" ? "No first item, sequence was empty." : "No last item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    no_more_args(a, 0, {}, what);
    List l = iterate(v);
    in.charge_bytes(l.size() * sizeof(Value));
    return Value::make_list(std::move(l));
  }
  if (name == "items") {
    no_more_args(a, 0, {}, what);
    if (v.is_undefined()) return Value::make_list({});
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({k, x}, true));
    in.charge_bytes(out.size() * 3 * sizeof(Value));
    return Value::make_list(std::move(out));
  }
  if (name == "dictsort") {
    no_more_args(a, 3, {"case_sensitive", "by", "reverse"}, what);
    if (v.is_undefined()) fail(v.s ? *v.s : "dictsort of an undefined value");
    if (!v.is_dict()) fail("dictsort: '" + type_name(v) + "' object has no attribute 'items'");
    const bool cs = want_bool(arg(a, 0, "case_sensitive"), in.options().dictsort_case_sensitive);
    const auto by = arg(a, 1, "by");
    const std::string by_s = by ? str_of(*by) : "key";
    if (by_s != "key" && by_s != "value") fail("You can only sort by either \"key\" or \"value\"");
    const size_t pos = by_s == "key" ? 0 : 1;
    const bool rev = want_bool(arg(a, 2, "reverse"), false);
    List out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({k, x}, true));
    std::stable_sort(out.begin(), out.end(), [&](const Value& p, const Value& q) {
      const Value& x = (*p.list)[pos];
      const Value& y = (*q.list)[pos];
      return rev ? less(fold(y, cs), fold(x, cs)) : less(fold(x, cs), fold(y, cs));
    });
    in.charge_bytes(out.size() * 3 * sizeof(Value));
    return Value::make_list(std::move(out));
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    no_more_args(a, name == "sort" ? 3 : 2, {"reverse", "case_sensitive", "attribute"}, what);
    const size_t off = name == "sort" ? 1 : 0;
    const bool rev = name == "sort" && want_bool(arg(a, 0, "reverse"), false);
    const bool cs = want_bool(arg(a, off, "case_sensitive"), false);
    const std::string attr = attribute_arg(arg(a, off + 1, "attribute"));
    List items = iterate(v);
    auto key = [&](const Value& x) { return fold(attr.empty() ? x : get_path(in, x, attr), cs); };
    if (name == "unique") {
      List out;
      List seen;
      for (const auto& x : items) {
        const Value k = key(x);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) continue;
        seen.push_back(k);
        out.push_back(x);
      }
      return Value::make_list(std::move(out));
    }
    if (name == "min" || name == "max") {
      if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
      Value best = items[0];
      for (size_t k = 1; k < items.size(); ++k)
        if (name == "min" ? less(key(items[k]), key(best)) : less(key(best), key(items[k]))) best = items[k];
      return best;
    }
    std::stable_sort(items.begin(), items.end(),
                     [&](const Value& x, const Value& y) { return rev ? less(key(y), key(x)) : less(key(x), key(y)); });
    return Value::make_list(std::move(items));
  }
  if (name == "reverse") {
    no_more_args(a, 0, {}, what);
    if (v.is_string()) return slice(in, v, Value::none(), Value::none(), Value::integer(-1));
    List l = iterate(v);
    std::reverse(l.begin(), l.end());
    return Value::make_list(std::move(l));
  }
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const List items = iterate(v);
    List out;
    if (name == "map") {
      const auto attr_kw = std::find_if(a.keyword.begin(), a.keyword.end(), [](const auto& p) { return p.first == "attribute"; });
      if (attr_kw != a.keyword.end()) {
        no_more_args(a, 0, {"attribute", "default"}, what);
        const std::string attr = attribute_arg(attr_kw->second);
        const auto def = arg(a, 99, "default");
        for (const auto& x : items) {
          Value r = get_path(in, x, attr);
          if (r.is_undefined() && def) r = *def;
          out.push_back(std::move(r));
        }
      } else {
        if (a.positional.empty() || !a.positional[0].is_string()) fail("map: give a filter name or attribute=");
        const std::string f = a.positional[0].str();
        if (!has_filter(f)) fail("unsupported filter '" + f + "'");
        for (const auto& x : items) {
          in.step();
          CallArgs r = rest_args(a, 1);
          out.push_back(apply_filter(in, f, x, r));
        }
      }
      return Value::make_list(std::move(out));
    }
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "select" || name == "selectattr";
    size_t next = 0;
    std::string attr;
    if (by_attr) {
      if (a.positional.empty()) fail(name + " needs an attribute name");
      attr = attribute_arg(a.positional[0]);
      next = 1;
    }
    std::string test;
    if (a.positional.size() > next) {
      if (!a.positional[next].is_string()) fail(name + ": the test name must be a string");
      test = a.positional[next].str();
      if (!has_test(test)) fail("unsupported test '" + test + "'");
    }
    for (const auto& x : items) {
      in.step();
      const Value subject = by_attr ? get_path(in, x, attr) : x;
      bool ok;
      if (test.empty()) {
        ok = truthy(subject);
      } else {
        CallArgs r = rest_args(a, next + 1);
        ok = apply_test(in, test, subject, r);
      }
      if (ok == keep) out.push_back(x);
    }
    return Value::make_list(std::move(out));
  }
  if (name == "int") {
    no_more_args(a, 2, {"default", "base"}, what);
    const auto base = arg(a, 1, "base");
    return to_int(v, arg(a, 0, "default").value_or(Value::integer(0)), base ? base->as_int() : 10);
  }
  if (name == "float") {
    no_more_args(a, 1, {"default"}, what);
    const Value def = arg(a, 0, "default").value_or(Value::number(0));
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
      const std::string s = py_strip(v.str(), true, true, nullptr);
      char* end = nullptr;
      const double f = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0) return Value::number(f);
    }
    return def;
  }
  if (name == "abs") {
    no_more_args(a, 0, {}, what);
    if (v.kind == Value::Kind::Float) return Value::number(std::fabs(v.f));
    if (!is_int_like(v)) fail("bad operand type for abs(): '" + type_name(v) + "'");
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (name == "round") {
    no_more_args(a, 2, {"precision", "method"}, what);
    const auto p = arg(a, 0, "precision");
    const int64_t precision = p ? p->as_int() : 0;
    const auto m = arg(a, 1, "method");
    const std::string method = m ? str_of(*m) : "common";
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_double() * scale;
    double r;
    if (method == "common") r = std::nearbyint(x);
    else if (method == "ceil") r = std::ceil(x);
    else if (method == "floor") r = std::floor(x);
    else fail("method must be common, ceil or floor");
    return Value::number(r / scale);
  }
  if (name == "sum") {
    no_more_args(a, 2, {"attribute", "start"}, what);
    const std::string attr = attribute_arg(arg(a, 0, "attribute"));
    Value total = arg(a, 1, "start").value_or(Value::integer(0));
    for (const auto& x : iterate(v)) total = binary_op(in, "+", total, attr.empty() ? x : get_path(in, x, attr));
    return total;
  }
  if (name == "indent") {
    no_more_args(a, 3, {"width", "first", "blank"}, what);
    const auto w = arg(a, 0, "width");
    const std::string ind = w && w->is_string() ? w->str() : std::string(static_cast<size_t>(std::clamp<int64_t>(w ? w->as_int() : 4, 0, 1024)), ' ');
    const bool first = want_bool(arg(a, 1, "first"), false);
    const bool blank = want_bool(arg(a, 2, "blank"), false);
    CallArgs none;
    const Value lines_v = get_attr(in, Value::string(str_of(v) + "\n"), "splitlines").fn->call(in, none);
    const List& lines = *lines_v.list;
    std::string out;
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) out += "\n";
      const std::string& line = lines[k].str();
      if (k > 0 && (blank || !line.empty())) out += ind;
      out += line;
      in.check_string(out.size());
    }
    if (first) out = ind + out;
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (name == "wordcount") {
    no_more_args(a, 0, {}, what);
    CallArgs none;
    return Value::integer(static_cast<int64_t>(get_attr(in, Value::string(str_of(v)), "split").fn->call(in, none).list->size()));
  }
  fail("unsupported filter '" + name + "'");
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  using K = Value::Kind;
  auto other = [&]() -> Value {
    if (a.positional.empty()) fail("the test '" + name + "' needs an argument");
    return a.positional[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "true") return v.kind == K::Bool && v.b;
  if (name == "false") return v.kind == K::Bool && !v.b;
  if (name == "integer") return v.kind == K::Int;
  if (name == "float") return v.kind == K::Float;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.kind == K::Callable || v.is_undefined();  // Undefined has __call__
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    if (!is_int_like(v)) fail("the test '" + name + "' needs an integer");
    const int64_t m = v.as_int() % 2;
    return name == "odd" ? m != 0 : m == 0;
  }
  if (name == "divisibleby") {
    const Value n = other();
    if (!is_int_like(v) || !is_int_like(n)) fail("divisibleby needs integers");
    if (n.as_int() == 0) fail("integer division or modulo by zero");
    return binary_op(in, "%", v, n).as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, other());
  if (name == "ne" || name == "!=") return !equal(v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other());
  if (name == "le" || name == "<=") return compare("<=", v, other());
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other(), v);
  if (name == "ge" || name == ">=") return compare(">=", v, other());
  if (name == "in") return contains(other(), v);
  if (name == "sameas") {
    const Value o = other();
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case K::None:
      case K::Undefined: return true;
      case K::Bool: return v.b == o.b;
      case K::Int: return v.i == o.i && v.i >= -5 && v.i <= 256;  // CPython's cached small ints
      case K::String: return v.s == o.s;
      case K::List: return v.list == o.list;
      case K::Dict: return v.dict == o.dict;
      case K::Namespace: return v.ns == o.ns;
      case K::Callable: return v.fn == o.fn;
      default: return false;
    }
  }
  if (name == "lower" || name == "upper") {
    CallArgs none;
    return truthy(get_attr(in, Value::string(to_str(v)), name == "lower" ? "islower" : "isupper").fn->call(in, none));
  }
  if (name == "filter") return v.is_string() && has_filter(v.str());
  if (name == "test") return v.is_string() && has_test(v.str());
  fail("unsupported test '" + name + "'");
}

}  // namespace deltafin::jinja
