// JSON in and out of templates: a template's variables come from JSON, and
// the tojson filter writes exactly what Python's json.dumps writes.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "template/value.h"

namespace deltafin::jinja {

// Fails past max_depth levels of nesting.
Value from_json(const nlohmann::ordered_json& j, int max_depth);

struct DumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // json.dumps(indent=...) as the string of one level
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  int max_depth = 200;
};

// json.dumps(v, ...); Undefined, namespaces and callables are not serializable.
std::string dumps(const Value& v, const DumpOptions& o);

}  // namespace deltafin::jinja
