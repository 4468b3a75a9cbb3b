// How K3's chat template spells JSON values. The template is Jinja run by
// Python engines, so its bytes come from Python: str() for attribute values,
// json.dumps (ensure_ascii=False) for argument values and schemas, float
// repr, str.strip() and str.lower(), and Python truthiness for `if x`.
// These functions reproduce exactly those spellings for parsed JSON values.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace deltafin::tokenizer {

// Python's `if value`: null, false, 0, 0.0, "", [] and {} are false.
bool py_truthy(const nlohmann::ordered_json& value);

// Python's str(value) for a scalar (None, True, 12, 0.5, text as-is);
// arrays and objects are an error (the template never needs their repr).
Result<std::string> py_str(const nlohmann::ordered_json& value);

// Python's repr(float): shortest round-trip digits, exponent form when the
// exponent is below -4 or at least 16 ("1e+16", "1e-05"), ".0" on integers.
std::string py_float_repr(double value);

// json.dumps(value, ensure_ascii=False): ", " and ": " separators, object
// keys in their given order.
std::string py_json_dumps(const nlohmann::ordered_json& value);

// The template's `json_sorted` macro: compact (no spaces), every object's
// keys sorted as the reference encoder's json.dumps(sort_keys=True) sorts
// them (by code point, case-sensitive: the order the template's comment
// says it matches; Jinja's own dictsort would ignore case), scalars as
// json.dumps writes them.
std::string py_json_sorted(const nlohmann::ordered_json& value);

// Python's str.strip(): drops leading and trailing str.isspace() characters.
// Invalid UTF-8 is returned unchanged (the encoder rejects it later).
std::string py_strip(std::string_view s);

}  // namespace deltafin::tokenizer
