// What templates call: filters, tests, attribute and item access (with the
// str and dict methods templates use), slicing, operators, global functions.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "template/interpreter.h"
#include "template/value.h"

namespace deltafin::jinja {

bool has_filter(std::string_view name);
bool has_test(std::string_view name);
Value apply_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);

// Jinja's getattr (obj.name: a method, else the item) and getitem (obj[key]:
// the item, else the attribute); missing gives Undefined, unsafe methods
// (those that would mutate) fail when called, as in the immutable sandbox.
Value get_attr(Interpreter& in, const Value& obj, const std::string& name);
Value get_item(Interpreter& in, const Value& obj, const Value& key);
Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python's binary operators (+ - * / // % **), comparisons and `in`.
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
bool compare(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

// What `for` iterates: a list's items, a dict's keys, a string's characters;
// Undefined is empty.
List iterate(const Value& v);

// range, namespace, dict, raise_exception, strftime_now.
Dict builtin_globals();

// An argument by position or keyword, or nullopt.
std::optional<Value> arg(CallArgs& args, size_t pos, const char* name);
void no_more_args(const CallArgs& args, size_t max_positional, std::initializer_list<const char*> keywords,
                  const std::string& what);

}  // namespace deltafin::jinja
