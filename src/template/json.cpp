#include "template/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/text.h"

namespace deltafin::jinja {

Value from_json(const nlohmann::ordered_json& j, int max_depth) {
  if (max_depth < 0) fail("the template's input nests too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      Value v = Value::integer(u > static_cast<uint64_t>(INT64_MAX) ? 0 : static_cast<int64_t>(u));
      if (u > static_cast<uint64_t>(INT64_MAX)) v.s = std::make_shared<const std::string>(std::to_string(u));
      return v;
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(from_json(x, max_depth - 1));
      return Value::make_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (const auto& [k, x] : j.items()) d.items.emplace_back(Value::string(k), from_json(x, max_depth - 1));
      return Value::make_dict(std::move(d));
    }
    default: fail("the template's input holds a value JSON cannot carry");
  }
}

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  auto hex4 = [&](unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", v);
    out += buf;
  };
  for (char32_t c : decode_utf8(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          hex4(c);
        } else if (ensure_ascii && c > 0x7E) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            hex4(0xD800 | (v >> 10));
            hex4(0xDC00 | (v & 0x3FF));
          } else {
            hex4(c);
          }
        } else {
          append_utf8(out, c);
        }
    }
  }
  out.push_back('"');
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return py_float_repr(f);
}

std::string key_string(const Value& k) {
  switch (k.kind) {
    case Value::Kind::String: return k.str();
    case Value::Kind::Bool: return k.b ? "true" : "false";
    case Value::Kind::None: return "null";
    case Value::Kind::Int: return k.s ? *k.s : std::to_string(k.i);
    case Value::Kind::Float: return float_json(k.f);
    default: fail("tojson: keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

void dump(std::string& out, const Value& v, const DumpOptions& o, int level) {
  if (level > o.max_depth) fail("tojson: the value nests too deeply");
  auto newline = [&](int lvl) {
    if (!o.indent) return;
    out.push_back('\n');
    for (int k = 0; k < lvl; ++k) out += *o.indent;
  };
  switch (v.kind) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.b ? "true" : "false"; return;
    case Value::Kind::Int: out += v.s ? *v.s : std::to_string(v.i); return;
    case Value::Kind::Float: out += float_json(v.f); return;
    case Value::Kind::String: dump_string(out, v.str(), o.ensure_ascii); return;
    case Value::Kind::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      newline(level + 1);
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) {
          out += o.item_separator;
          newline(level + 1);
        }
        dump(out, (*v.list)[k], o, level + 1);
      }
      newline(level);
      out.push_back(']');
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, x] : v.dict->items) items.emplace_back(key_string(k), &x);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out.push_back('{');
      newline(level + 1);
      bool first = true;
      for (const auto& [k, x] : items) {
        if (!first) {
          out += o.item_separator;
          newline(level + 1);
        }
        first = false;
        dump_string(out, k, o.ensure_ascii);
        out += o.key_separator;
        dump(out, *x, o, level + 1);
      }
      newline(level);
      out.push_back('}');
      return;
    }
    default: fail("tojson: Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string dumps(const Value& v, const DumpOptions& o) {
  std::string out;
  dump(out, v, o, 0);
  return out;
}

}  // namespace deltafin::jinja
