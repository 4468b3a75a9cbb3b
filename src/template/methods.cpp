// Attribute and item access, slicing, iteration, the str/dict/list methods
// templates call, and Jinja's global functions.
#include <algorithm>
#include <ctime>
#include <fmt/format.h>

#include "template/builtins.h"
#include "template/text.h"

namespace deltafin::jinja {

std::optional<Value> arg(CallArgs& args, size_t pos, const char* name) {
  if (pos < args.positional.size()) return args.positional[pos];
  for (const auto& [k, v] : args.keyword)
    if (k == name) return v;
  return std::nullopt;
}

void no_more_args(const CallArgs& args, size_t max_positional, std::initializer_list<const char*> keywords,
                  const std::string& what) {
  if (args.positional.size() > max_positional)
    fail(what + " takes at most " + std::to_string(max_positional) + " positional argument(s)");
  for (const auto& [k, v] : args.keyword) {
    bool known = false;
    for (const char* kw : keywords) known = known || k == kw;
    if (!known) fail(what + " got an unexpected keyword argument '" + k + "'");
  }
}

namespace {

Value callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> f) {
  Value v;
  v.kind = Value::Kind::Callable;
  v.fn = std::make_shared<const Callable>(Callable{std::move(name), std::move(f)});
  return v;
}

const std::string& want_str(const std::optional<Value>& v, const std::string& what) {
  if (!v || !v->is_string()) fail(what + " must be a string");
  return v->str();
}

std::optional<std::string> opt_str(const std::optional<Value>& v, const std::string& what) {
  if (!v || v->is_none()) return std::nullopt;
  return want_str(v, what);
}

int64_t want_int(const Value& v, const std::string& what) {
  if (v.kind != Value::Kind::Int && v.kind != Value::Kind::Bool) fail(what + " must be an integer");
  return v.as_int();
}

bool ascii_only(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string change_case(const std::string& s, const std::string& method) {
  if (!ascii_only(s)) fail("str." + method + "() of non-ASCII text is not supported");
  std::string out = s;
  bool word_start = true;
  for (size_t k = 0; k < out.size(); ++k) {
    char& c = out[k];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    bool up = method == "upper";
    if (method == "title") up = word_start;
    if (method == "capitalize") up = k == 0;
    if (up && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    if (!up && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    word_start = !letter;
  }
  return out;
}

List split(Interpreter& in, const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit, bool right) {
  std::vector<std::string> parts;
  if (!sep) {
    const std::u32string u = decode_utf8(s);
    std::vector<std::pair<size_t, size_t>> words;
    size_t k = 0;
    while (k < u.size()) {
      while (k < u.size() && is_py_space(u[k])) ++k;
      if (k >= u.size()) break;
      size_t e = k;
      while (e < u.size() && !is_py_space(u[e])) ++e;
      words.emplace_back(k, e);
      k = e;
    }
    if (maxsplit >= 0 && static_cast<size_t>(maxsplit) < words.size()) {
      // The last (or first, from the right) piece keeps the rest as it is.
      const size_t keep = static_cast<size_t>(maxsplit);
      if (!right) {
        for (size_t w = 0; w < keep; ++w) parts.push_back(encode_utf8(u.substr(words[w].first, words[w].second - words[w].first)));
        parts.push_back(encode_utf8(u.substr(words[keep].first)));
      } else {
        const size_t first = words.size() - keep;
        parts.push_back(encode_utf8(u.substr(0, words[first - 1].second)));
        for (size_t w = first; w < words.size(); ++w)
          parts.push_back(encode_utf8(u.substr(words[w].first, words[w].second - words[w].first)));
      }
    } else {
      for (const auto& [a, b] : words) parts.push_back(encode_utf8(u.substr(a, b - a)));
    }
  } else {
    if (sep->empty()) fail("empty separator");
    if (!right) {
      size_t pos = 0;
      int64_t n = 0;
      while (maxsplit < 0 || n < maxsplit) {
        const size_t f = s.find(*sep, pos);
        if (f == std::string::npos) break;
        parts.push_back(s.substr(pos, f - pos));
        pos = f + sep->size();
        ++n;
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      int64_t n = 0;
      std::vector<std::string> rev;
      while (maxsplit < 0 || n < maxsplit) {
        if (end < sep->size()) break;
        const size_t f = s.rfind(*sep, end - sep->size());
        if (f == std::string::npos) break;
        rev.push_back(s.substr(f + sep->size(), end - f - sep->size()));
        end = f;
        ++n;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  in.check_items(parts.size());
  in.charge_bytes(s.size() + parts.size() * sizeof(Value));
  List out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

std::vector<std::string> affixes(const std::optional<Value>& v, const std::string& what) {
  if (v && v->is_list() && v->tuple) {
    std::vector<std::string> out;
    for (const auto& x : *v->list) out.push_back(want_str(x, what));
    return out;
  }
  return {want_str(v, what)};
}

Value string_method(Interpreter& in, const std::string& s, const std::string& name, CallArgs& a) {
  const std::string what = "str." + name + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    no_more_args(a, 1, {"chars"}, what);
    const auto chars = opt_str(arg(a, 0, "chars"), what + "'s argument");
    return Value::string(py_strip(s, name != "rstrip", name != "lstrip", chars ? &*chars : nullptr));
  }
  if (name == "split" || name == "rsplit") {
    no_more_args(a, 2, {"sep", "maxsplit"}, what);
    const auto sep = opt_str(arg(a, 0, "sep"), what + "'s separator");
    const auto max = arg(a, 1, "maxsplit");
    return Value::make_list(split(in, s, sep, max ? want_int(*max, "maxsplit") : -1, name == "rsplit"));
  }
  if (name == "startswith" || name == "endswith") {
    no_more_args(a, 1, {}, what);
    for (const auto& x : affixes(arg(a, 0, "prefix"), what + "'s argument")) {
      if (x.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0)
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "replace") {
    no_more_args(a, 3, {"count"}, what);
    const std::string& old = want_str(arg(a, 0, "old"), what + "'s old");
    const std::string& neu = want_str(arg(a, 1, "new"), what + "'s new");
    const auto count = arg(a, 2, "count");
    int64_t left = count ? want_int(*count, "count") : -1;
    std::string out;
    if (old.empty()) {
      // Python inserts `new` around every character.
      const std::u32string u = decode_utf8(s);
      for (size_t k = 0; k <= u.size(); ++k) {
        if (left != 0) {
          in.check_string(out.size() + neu.size());
          out += neu;
          if (left > 0) --left;
        }
        if (k < u.size()) append_utf8(out, u[k]);
      }
    } else {
      size_t pos = 0;
      while (left != 0) {
        const size_t f = s.find(old, pos);
        if (f == std::string::npos) break;
        out.append(s, pos, f - pos);
        out += neu;
        in.check_string(out.size());
        pos = f + old.size();
        if (left > 0) --left;
      }
      out.append(s, pos);
    }
    in.check_string(out.size());
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    no_more_args(a, 0, {}, what);
    return Value::string(change_case(s, name));
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index" || name == "rindex") {
    no_more_args(a, 1, {}, what);
    const std::string& sub = want_str(arg(a, 0, "sub"), what + "'s argument");
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(count_code_points(s)) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t f = name == "find" || name == "index" ? s.find(sub) : s.rfind(sub);
    if (f == std::string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(count_code_points(std::string_view(s).substr(0, f))));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    no_more_args(a, 1, {}, what);
    const std::string& x = want_str(arg(a, 0, "affix"), what + "'s argument");
    if (x.size() <= s.size()) {
      if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
      if (name == "removesuffix" && s.compare(s.size() - x.size(), x.size(), x) == 0)
        return Value::string(s.substr(0, s.size() - x.size()));
    }
    return Value::string(s);
  }
  if (name == "join") {
    no_more_args(a, 1, {}, what);
    const auto seq = arg(a, 0, "iterable");
    if (!seq) fail(what + " takes one argument");
    std::string out;
    bool first = true;
    for (const auto& x : iterate(*seq)) {
      if (!x.is_string()) fail("sequence item: expected str instance, " + type_name(x) + " found");
      if (!first) out += s;
      first = false;
      out += x.str();
      in.check_string(out.size());
    }
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    no_more_args(a, 0, {}, what);
    if (name == "isspace") {
      const std::u32string u = decode_utf8(s);
      return Value::boolean(!u.empty() && std::all_of(u.begin(), u.end(), is_py_space));
    }
    if (!ascii_only(s)) fail(what + " of non-ASCII text is not supported");
    bool any_cased = false, ok = !s.empty();
    for (char c : s) {
      const bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z', digit = c >= '0' && c <= '9';
      any_cased = any_cased || lower || upper;
      if (name == "isdigit") ok = ok && digit;
      if (name == "isalpha") ok = ok && (lower || upper);
      if (name == "isalnum") ok = ok && (lower || upper || digit);
      if (name == "isupper") ok = ok && !lower;
      if (name == "islower") ok = ok && !upper;
    }
    if (name == "isupper" || name == "islower") ok = ok && any_cased;
    return Value::boolean(ok);
  }
  if (name == "splitlines") {
    no_more_args(a, 0, {}, what);
    List out;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t e = s.find_first_of("\n\r", pos);
      if (e == std::string::npos) {
        out.push_back(Value::string(s.substr(pos)));
        break;
      }
      out.push_back(Value::string(s.substr(pos, e - pos)));
      pos = e + (s[e] == '\r' && e + 1 < s.size() && s[e + 1] == '\n' ? 2 : 1);
    }
    in.check_items(out.size());
    return Value::make_list(std::move(out));
  }
  fail("unsupported construct: the string method " + what);
}

bool is_str_method(const std::string& n) {
  static const char* const kNames[] = {
      "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
      "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
      "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
      "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
      "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"};
  for (const char* k : kNames)
    if (n == k) return true;
  return false;
}

Value unsafe(const std::string& type, const std::string& name) {
  return callable(type + "." + name, [type, name](Interpreter&, CallArgs&) -> Value {
    fail("access to attribute '" + name + "' of '" + type + "' object is unsafe (templates cannot change values)");
  });
}

Value dict_method(const Value& obj, const std::string& name) {
  const auto d = obj.dict;
  if (name == "get")
    return callable("dict.get", [d](Interpreter&, CallArgs& a) -> Value {
      no_more_args(a, 2, {}, "dict.get()");
      if (a.positional.empty()) fail("dict.get() takes at least 1 argument");
      const Value* v = d->find(a.positional[0]);
      if (v) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value::none();
    });
  if (name == "items" || name == "keys" || name == "values")
    return callable("dict." + name, [d, name](Interpreter& in, CallArgs& a) -> Value {
      no_more_args(a, 0, {}, "dict." + name + "()");
      List out;
      out.reserve(d->items.size());
      for (const auto& [k, v] : d->items) {
        if (name == "items") out.push_back(Value::make_list({k, v}, true));
        else out.push_back(name == "keys" ? k : v);
      }
      in.charge_bytes(out.size() * sizeof(Value) * (name == "items" ? 3 : 1));
      return Value::make_list(std::move(out));
    });
  if (name == "copy") return callable("dict.copy", [obj](Interpreter&, CallArgs&) { return obj; });
  return Value::undefined();
}

}  // namespace

Value get_attr(Interpreter&, const Value& obj, const std::string& name) {
  const std::string missing = fmt::format("'{} object' has no attribute '{}'", type_name(obj), name);
  switch (obj.kind) {
    case Value::Kind::Dict: {
      if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear")
        return unsafe("dict", name);
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      if (name == "fromkeys") fail("unsupported construct: dict.fromkeys");
      if (const Value* v = obj.dict->find(std::string_view(name))) return *v;
      return Value::undefined(missing);
    }
    case Value::Kind::String:
      if (is_str_method(name)) {
        const auto s = obj.s;
        return callable("str." + name, [s, name](Interpreter& i, CallArgs& a) { return string_method(i, *s, name, a); });
      }
      return Value::undefined(missing);
    case Value::Kind::List:
      if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
          name == "reverse" || name == "sort" || name == "clear")
        return unsafe(type_name(obj), name);
      if (name == "index" || name == "count") {
        const auto l = obj.list;
        return callable(type_name(obj) + "." + name, [l, name](Interpreter&, CallArgs& a) -> Value {
          no_more_args(a, 1, {}, "list." + name + "()");
          if (a.positional.empty()) fail("list." + name + "() takes one argument");
          int64_t n = 0;
          for (size_t k = 0; k < l->size(); ++k) {
            if (!equal((*l)[k], a.positional[0])) continue;
            if (name == "index") return Value::integer(static_cast<int64_t>(k));
            ++n;
          }
          if (name == "index") fail("the value is not in the list");
          return Value::integer(n);
        });
      }
      return Value::undefined(missing);
    case Value::Kind::Namespace:
      if (const Value* v = obj.ns->find(name)) return *v;
      return Value::undefined(missing);
    default: return Value::undefined(missing);
  }
}

Value get_item(Interpreter& in, const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Value::Kind::Dict:
      if (const Value* v = obj.dict->find(key)) return *v;
      if (key.is_string()) return get_attr(in, obj, key.str());
      return Value::undefined("'dict object' has no item " + repr(key));
    case Value::Kind::List:
    case Value::Kind::String: {
      if (key.is_string()) return get_attr(in, obj, key.str());
      if (key.kind != Value::Kind::Int && key.kind != Value::Kind::Bool)
        return Value::undefined("'" + type_name(obj) + " object' has no item " + repr(key));
      int64_t i = key.as_int();
      if (obj.is_list()) {
        const auto n = static_cast<int64_t>(obj.list->size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined("list index out of range");
        return (*obj.list)[static_cast<size_t>(i)];
      }
      const std::u32string u = decode_utf8(obj.str());
      const auto n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("string index out of range");
      std::string out;
      append_utf8(out, u[static_cast<size_t>(i)]);
      return Value::string(std::move(out));
    }
    case Value::Kind::Namespace:
      if (key.is_string()) return get_attr(in, obj, key.str());
      return Value::undefined("'" + type_name(obj) + " object' has no item " + repr(key));
    default: return Value::undefined("'" + type_name(obj) + " object' has no item " + repr(key));
  }
}

Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (!obj.is_list() && !obj.is_string()) fail("'" + type_name(obj) + "' object is not subscriptable");
  auto bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    return want_int(v, "slice indices");
  };
  const int64_t st = bound(step).value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  std::u32string u;
  if (obj.is_string()) u = decode_utf8(obj.str());
  const int64_t len = obj.is_list() ? static_cast<int64_t>(obj.list->size()) : static_cast<int64_t>(u.size());
  const int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? len : len - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t a = clamp(bound(start), st > 0 ? lower : upper);
  const int64_t b = clamp(bound(stop), st > 0 ? upper : lower);
  std::vector<size_t> idx;
  for (int64_t k = a; st > 0 ? k < b : k > b; k += st) idx.push_back(static_cast<size_t>(k));
  if (obj.is_list()) {
    List out;
    out.reserve(idx.size());
    for (size_t k : idx) out.push_back((*obj.list)[k]);
    in.charge_bytes(out.size() * sizeof(Value));
    return Value::make_list(std::move(out), obj.tuple);
  }
  std::u32string out;
  for (size_t k : idx) out.push_back(u[k]);
  std::string s = encode_utf8(out);
  in.charge_bytes(s.size());
  return Value::string(std::move(s));
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return *v.list;
    case Value::Kind::Dict: {
      List keys;
      keys.reserve(v.dict->items.size());
      for (const auto& [k, x] : v.dict->items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (char32_t c : decode_utf8(v.str())) {
        std::string s;
        append_utf8(s, c);
        chars.push_back(Value::string(std::move(s)));
      }
      return chars;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

Dict builtin_globals() {
  Dict g;
  g.set(Value::string("range"), callable("range", [](Interpreter& in, CallArgs& a) -> Value {
          no_more_args(a, 3, {}, "range()");
          if (a.positional.empty()) fail("range expected at least 1 argument, got 0");
          int64_t start = 0, stop = 0, step = 1;
          if (a.positional.size() == 1) {
            stop = want_int(a.positional[0], "range()'s argument");
          } else {
            start = want_int(a.positional[0], "range()'s start");
            stop = want_int(a.positional[1], "range()'s stop");
            if (a.positional.size() == 3) step = want_int(a.positional[2], "range()'s step");
          }
          if (step == 0) fail("range() arg 3 must not be zero");
          // The sandbox's limit (jinja2.sandbox.MAX_RANGE), computed without overflow.
          const long double n = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                          : (static_cast<long double>(start) - stop - step - 1) / -step;
          if (n > 100000) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
          List out;
          for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(Value::integer(k));
          in.charge_bytes(out.size() * sizeof(Value));
          return Value::make_list(std::move(out));
        }));
  auto from_kwargs = [](Interpreter& in, CallArgs& a, const std::string& what) {
    if (a.positional.size() > 1) fail(what + " takes at most one positional argument");
    Dict d;
    if (!a.positional.empty()) {
      const Value& init = a.positional[0];
      if (!init.is_dict()) fail(what + "'s positional argument must be a dict");
      d = *init.dict;
    }
    for (auto& [k, v] : a.keyword) d.set(Value::string(k), v);
    in.charge_bytes(d.items.size() * 2 * sizeof(Value));
    return d;
  };
  g.set(Value::string("namespace"), callable("namespace", [from_kwargs](Interpreter& in, CallArgs& a) -> Value {
          const Dict d = from_kwargs(in, a, "namespace()");
          auto ns = in.new_namespace();
          for (const auto& [k, v] : d.items) {
            if (!k.is_string()) fail("namespace() keys must be strings");
            ns->set(k.str(), v);
          }
          Value v;
          v.kind = Value::Kind::Namespace;
          v.ns = std::move(ns);
          return v;
        }));
  g.set(Value::string("dict"), callable("dict", [from_kwargs](Interpreter& in, CallArgs& a) -> Value {
          return Value::make_dict(from_kwargs(in, a, "dict()"));
        }));
  g.set(Value::string("raise_exception"), callable("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
          const auto m = arg(a, 0, "message");
          fail(m ? to_str(*m) : std::string("raise_exception() called"));
        }));
  g.set(Value::string("strftime_now"), callable("strftime_now", [](Interpreter& in, CallArgs& a) -> Value {
          no_more_args(a, 1, {}, "strftime_now()");
          const std::string& format = want_str(arg(a, 0, "format"), "strftime_now()'s format");
          if (!in.options().now) fail("strftime_now() needs a clock, and this render was given none");
          const auto t = static_cast<time_t>(*in.options().now);
          struct tm tm;
          localtime_r(&t, &tm);
          char buf[512];
          const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
          if (n == 0 && !format.empty()) fail("strftime_now(): the formatted time is too long or empty");
          return Value::string(std::string(buf, n));
        }));
  for (const char* name : {"lipsum", "cycler", "joiner"}) {
    const std::string n = name;
    g.set(Value::string(n), callable(n, [n](Interpreter&, CallArgs&) -> Value {
            fail("unsupported construct: the global function " + n + "()");
          }));
  }
  return g;
}

}  // namespace deltafin::jinja
