// The values a chat template computes with: Python's types as Jinja sees them
// (None, bool, int, float, str, list/tuple, dict with insertion order), plus
// Jinja's Undefined, namespace() objects and callables (macros, built-in
// functions, bound methods). Strings, lists and dicts are immutable and
// shared, as in Jinja's ImmutableSandboxedEnvironment; a namespace is the one
// mutable object and is shared by reference.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deltafin::jinja {

// A template's run-time error: a clear message and the template line (0 when
// not yet known; the statement being executed adds it). Thrown inside the
// interpreter only, so that a deeply nested evaluation unwinds in one step;
// Template::render turns it into a Status.
struct TemplateError {
  std::string message;
  int line = 0;
};

[[noreturn]] void fail(std::string message);

// The deepest a list or dict may nest (json.dumps and repr in Python stop near 1000).
constexpr int kMaxValueDepth = 256;

struct Value;
struct Dict;
struct Namespace;
struct Callable;
using List = std::vector<Value>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };
  Kind kind = Kind::Undefined;
  bool b = false;
  bool tuple = false;  // a List written as a tuple: printed with (), equal to nothing else
  // How deeply a List or Dict nests (1 for one holding no containers):
  // printing, comparing and freeing values recurse, so it is bounded.
  int depth = 0;
  int64_t i = 0;
  double f = 0;
  // String: the text; Undefined: why it is undefined; Int: the decimal digits
  // of a JSON integer beyond int64 (printed as is; arithmetic on it fails).
  std::shared_ptr<const std::string> s;
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;
  std::shared_ptr<Namespace> ns;
  std::shared_ptr<const Callable> fn;

  static Value undefined(std::string why = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(List v, bool tuple = false);
  static Value make_dict(Dict v);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  // int, float or bool (Python's bool is an int).
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  const std::string& str() const { return *s; }
  double as_double() const;
  int64_t as_int() const;  // Int or Bool
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
  bool is_loop = false;  // the loop object: read-only to templates
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

class Interpreter;
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;  // for errors: "range", "str.split", "macro render_text"
  std::function<Value(Interpreter&, CallArgs&)> call;
};

// Python's truthiness; Undefined is false.
bool truthy(const Value& v);
// Python ==: True == 1 == 1.0, lists and dicts deeply.
bool equal(const Value& a, const Value& b);
// Python <, raising a TypeError-like error where Python does.
bool less(const Value& a, const Value& b);
// Python's type names, for messages: 'str', 'int', 'dict', 'NoneType'.
std::string type_name(const Value& v);
// str(v) as Jinja prints it ({{ v }}): Undefined prints as nothing.
std::string to_str(const Value& v);
// repr(v), as inside printed lists and dicts.
std::string repr(const Value& v);

}  // namespace deltafin::jinja
