// Python's arithmetic and comparison operators as templates see them.
#include <cmath>

#include "template/builtins.h"
#include "template/text.h"

namespace deltafin::jinja {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    fail(u.s ? *u.s : "'" + op + "' with an undefined value");
  }
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// a op b on 64-bit integers; Python's are unbounded, so overflow is an error here.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) fail("integer overflow (this interpreter's integers are 64-bit)");
  return r;
}
bool add(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const size_t len = seq.str().size();
    if (len && static_cast<uint64_t>(n) > in.limits().max_output_bytes / len) in.check_string(in.limits().max_output_bytes + 1);
    in.check_string(len * static_cast<size_t>(n));
    in.charge_bytes(len * static_cast<size_t>(n));
    if (len == 1) return Value::string(std::string(static_cast<size_t>(n), seq.str()[0]));
    std::string out;
    out.reserve(len * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) out += seq.str();
    return Value::string(std::move(out));
  }
  const size_t len = seq.list->size();
  if (len && static_cast<uint64_t>(n) > in.limits().max_items / len) in.check_items(in.limits().max_items + 1);
  in.check_items(len * static_cast<size_t>(n));
  in.charge_bytes(len * static_cast<size_t>(n) * sizeof(Value));
  List out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::make_list(std::move(out), seq.tuple);
}

}  // namespace

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && a.kind != Value::Kind::Float && b.kind != Value::Kind::Float;
  if (op == "+") {
    if (ints) return Value::integer(checked(add, a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      in.check_string(a.str().size() + b.str().size());
      in.charge_bytes(a.str().size() + b.str().size());
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.tuple == b.tuple) {
      in.check_items(a.list->size() + b.list->size());
      in.charge_bytes((a.list->size() + b.list->size()) * sizeof(Value));
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(l), a.tuple);
    }
    if (a.is_list() && b.is_list())
      fail(std::string("can only concatenate ") + (a.tuple ? "tuple" : "list") + " (not \"" + type_name(b) +
           "\") to " + (a.tuple ? "tuple" : "list"));
    if (a.is_string() && !b.is_undefined())
      fail("can only concatenate str (not \"" + type_name(b) + "\") to str");
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(checked(sub, a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked(mul, a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && (b.kind == Value::Kind::Int || b.kind == Value::Kind::Bool))
      return repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.kind == Value::Kind::Int || a.kind == Value::Kind::Bool))
      return repeat(in, b, a.as_int());
    unsupported(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0) fail("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (a.is_string() && op == "%") fail("unsupported construct: '%' string formatting");
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0) fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (x == INT64_MIN && y == -1) fail("integer overflow (this interpreter's integers are 64-bit)");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    const double x = a.as_double(), y = b.as_double();
    if (op == "%") return Value::number(py_fmod(x, y));
    return Value::number(std::floor(x / y));
  }
  if (op == "**") {
    if (!nums) unsupported(op, a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), result = 1;
      while (e > 0) {
        if (e & 1) result = checked(mul, result, base);
        e >>= 1;
        if (e > 0) base = checked(mul, base, base);
      }
      return Value::integer(result);
    }
    if (a.as_double() == 0 && b.as_double() < 0) fail("zero to a negative power");
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  fail("unknown operator " + op);
}

bool contains(const Value& c, const Value& item) {
  switch (c.kind) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
      return c.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      for (const auto& x : *c.list)
        if (equal(x, item)) return true;
      return false;
    case Value::Kind::Dict:
      if (item.is_list() && !item.tuple) fail("unhashable type: 'list'");
      if (item.is_dict()) fail("unhashable type: 'dict'");
      return c.dict->find(item) != nullptr;
    default: fail("argument of type '" + type_name(c) + "' is not iterable");
  }
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return less(a, b) || equal(a, b);
  if (op == ">=") return less(b, a) || equal(a, b);
  fail("unknown comparison " + op);
}

}  // namespace deltafin::jinja
