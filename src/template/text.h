// Text helpers with Python's meaning: str positions count code points, not
// bytes; whitespace is str.isspace()'s set; floats print as repr() does.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin::jinja {

std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
size_t count_code_points(std::string_view s);

bool is_py_space(char32_t c);
// str.strip()/lstrip()/rstrip(): chars empty means whitespace.
std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars);

// repr(float): the shortest round-trip digits, 'e' notation outside 1e-4..1e16.
std::string py_float_repr(double v);
// repr(str): quoted the way Python quotes.
std::string py_str_repr(std::string_view s);

}  // namespace deltafin::jinja
