#include "tokenizer/template_values.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>


#include "tokenizer/utf8.h"

namespace deltafin::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;

// json.dumps' string escaping with ensure_ascii=False: quote, backslash and
// the C0 controls only (\uXXXX in lowercase hex); other bytes pass through.
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
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
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// json.dumps of a scalar (never called with arrays or objects).
void append_json_scalar(std::string& out, const ojson& v) {
  if (v.is_null()) out += "null";
  else if (v.is_boolean()) out += v.get<bool>() ? "true" : "false";
  else if (v.is_number_unsigned()) out += std::to_string(v.get<uint64_t>());
  else if (v.is_number_integer()) out += std::to_string(v.get<int64_t>());
  else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) out += "NaN";
    else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
    else out += py_float_repr(d);
  } else if (v.is_string()) append_json_string(out, v.get_ref<const std::string&>());
  else out += "null";  // binary / discarded values do not come from parsed JSON
}

void append_dumps(std::string& out, const ojson& v) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      if (!first) out += ", ";
      first = false;
      append_json_string(out, k);
      out += ": ";
      append_dumps(out, item);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      append_dumps(out, v[i]);
    }
    out += ']';
  } else {
    append_json_scalar(out, v);
  }
}

void append_sorted(std::string& out, const ojson& v) {
  if (v.is_object()) {
    struct Entry {
      const std::string* key;
      const ojson* value;
    };
    std::vector<Entry> entries;
    for (auto it = v.begin(); it != v.end(); ++it) entries.push_back({&it.key(), &it.value()});
    // K3's reference encoder sorts keys as json.dumps(sort_keys=True) does:
    // by code point, case-sensitively, which is the byte order of UTF-8.
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return *a.key < *b.key; });
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, *entries[i].key);
      out += ':';
      append_sorted(out, *entries[i].value);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      append_sorted(out, v[i]);
    }
    out += ']';
  } else {
    append_json_scalar(out, v);
  }
}

}  // namespace

bool py_truthy(const ojson& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_unsigned()) return v.get<uint64_t>() != 0;
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  if (v.is_number_float()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
}

Result<std::string> py_str(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::string("None");
  if (v.is_boolean()) return std::string(v.get<bool>() ? "True" : "False");
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return std::string("nan");
    if (std::isinf(d)) return std::string(d > 0 ? "inf" : "-inf");
    return py_float_repr(d);
  }
  return error("a {} where the chat template needs text, a number, a boolean or null", v.type_name());
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form: "-1.2345e+06".
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp10 = std::stoi(sci.substr(epos + 1));
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  const int n = static_cast<int>(digits.size());
  if (exp10 < -4 || exp10 >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    const int a = std::abs(exp10);
    out += exp10 < 0 ? "e-" : "e+";
    if (a < 10) out += '0';
    return out + std::to_string(a);
  }
  const int point = exp10 + 1;  // digits before the decimal point
  if (point <= 0) return sign + "0." + std::string(size_t(-point), '0') + digits;
  if (point >= n) return sign + digits + std::string(size_t(point - n), '0') + ".0";
  return sign + digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
}

std::string py_json_dumps(const ojson& v) {
  std::string out;
  append_dumps(out, v);
  return out;
}

std::string py_json_sorted(const ojson& v) {
  std::string out;
  append_sorted(out, v);
  return out;
}

std::string py_strip(std::string_view s) {
  if (first_invalid_utf8(s) != kUtf8Valid) return std::string(s);
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t i = b;
    if (!is_python_space(next_code_point(s, i))) break;
    b = i;
  }
  while (e > b) {
    size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_python_space(next_code_point(s, i))) break;
    e = start;
  }
  return std::string(s.substr(b, e - b));
}


}  // namespace deltafin::tokenizer
