// Reads config.json fields with messages that name the key: shared by the
// family parsers (src/model/families/). A Reader keeps the first error.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deltafin {

struct ConfigReader {
  const nlohmann::json& obj;
  std::string where;
  Status status;

  const nlohmann::json* field(const char* key) {
    if (!status.ok()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end()) {
      status = error("config.json: {}{} is missing", where, key);
      return nullptr;
    }
    return &*it;
  }
  int positive_int(const char* key) {
    auto* v = field(key);
    if (!v) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (1 << 30)) {
      status = error("config.json: {}{} must be a positive integer", where, key);
      return 0;
    }
    return int(v->get<int64_t>());
  }
  int nonneg_int(const char* key) {
    auto* v = field(key);
    if (!v) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > (1 << 30)) {
      status = error("config.json: {}{} must be a non-negative integer", where, key);
      return 0;
    }
    return int(v->get<int64_t>());
  }
  float number(const char* key) {
    auto* v = field(key);
    if (!v) return 0;
    if (!v->is_number()) {
      status = error("config.json: {}{} must be a number", where, key);
      return 0;
    }
    return v->get<float>();
  }
  void expect_string(const char* key, const char* value) {
    auto* v = field(key);
    if (v && (!v->is_string() || v->get<std::string>() != value))
      status = error("config.json: {}{} must be \"{}\"", where, key, value);
  }
  void expect_bool(const char* key, bool value) {
    auto* v = field(key);
    if (v && (!v->is_boolean() || v->get<bool>() != value))
      status = error("config.json: {}{} must be {}", where, key, value);
  }
  void expect_int(const char* key, int value) {
    auto* v = field(key);
    if (v && (!v->is_number_integer() || v->get<int64_t>() != value))
      status = error("config.json: {}{} must be {}", where, key, value);
  }
  // Optional keys: absent or null gives the default.
  bool has(const char* key) const {
    auto it = obj.find(key);
    return it != obj.end() && !it->is_null();
  }
  bool opt_bool(const char* key, bool def) {
    if (!has(key)) return def;
    auto* v = field(key);
    if (v && !v->is_boolean()) status = error("config.json: {}{} must be true or false", where, key);
    return v && v->is_boolean() ? v->get<bool>() : def;
  }
  double opt_number(const char* key, double def) {
    if (!has(key)) return def;
    auto* v = field(key);
    if (v && !v->is_number()) status = error("config.json: {}{} must be a number", where, key);
    return v && v->is_number() ? v->get<double>() : def;
  }
  int opt_int(const char* key, int def) { return has(key) ? nonneg_int(key) : def; }
  std::vector<int> opt_int_list(const char* key) { return has(key) ? int_list(key) : std::vector<int>{}; }
  std::vector<int> int_list(const char* key) {
    std::vector<int> out;
    auto* v = field(key);
    if (!v) return out;
    if (!v->is_array()) {
      status = error("config.json: {}{} must be a list of integers", where, key);
      return out;
    }
    for (auto& x : *v) {
      if (!x.is_number_integer()) {
        status = error("config.json: {}{} must be a list of integers", where, key);
        return {};
      }
      out.push_back(x.get<int>());
    }
    return out;
  }
};


}  // namespace deltafin
