// Python spellings the chat template's bytes depend on. Expected strings are
// what Python 3.11 prints (repr, json.dumps(ensure_ascii=False, sort_keys)).
#include <gtest/gtest.h>

#include "tokenizer/template_values.h"

namespace deltafin::tokenizer {
namespace {

using nlohmann::ordered_json;

TEST(TemplateValues, FloatReprMatchesPython) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},          {0.1, "0.1"},         {-2.5, "-2.5"},       {1e16, "1e+16"},
      {1e15, "1000000000000000.0"}, {1e-5, "1e-05"}, {0.0001, "0.0001"}, {1.5e-7, "1.5e-07"},
      {123456789.125, "123456789.125"}, {1e300, "1e+300"}, {-0.0, "-0.0"}, {0.0, "0.0"},
      {1.7976931348623157e308, "1.7976931348623157e+308"}, {5e-324, "5e-324"}, {2.0 / 3, "0.6666666666666666"},
      {12345678901234567890.0, "1.2345678901234567e+19"}};
  for (const auto& [v, want] : cases) EXPECT_EQ(py_float_repr(v), want) << want;
}

TEST(TemplateValues, StrAndTruthiness) {
  EXPECT_EQ(py_str(ordered_json(nullptr)).value(), "None");
  EXPECT_EQ(py_str(ordered_json(true)).value(), "True");
  EXPECT_EQ(py_str(ordered_json(-3)).value(), "-3");
  EXPECT_EQ(py_str(ordered_json(2.0)).value(), "2.0");
  EXPECT_EQ(py_str(ordered_json("x")).value(), "x");
  EXPECT_FALSE(py_str(ordered_json::array()).ok());
  for (const char* falsy : {"null", "false", "0", "0.0", "\"\"", "[]", "{}"})
    EXPECT_FALSE(py_truthy(ordered_json::parse(falsy))) << falsy;
  for (const char* truthy : {"true", "1", "-0.5", "\" \"", "[0]", "{\"a\":null}"})
    EXPECT_TRUE(py_truthy(ordered_json::parse(truthy))) << truthy;
}

TEST(TemplateValues, DumpsAndSorted) {
  const auto v = ordered_json::parse(R"({"b":[1,2.5,null,true],"A":"é\n\"\u0001\u007f","a":{"y":{},"X":[]}})");
  EXPECT_EQ(py_json_dumps(v), "{\"b\": [1, 2.5, null, true], \"A\": \"é\\n\\\"\\u0001\x7f\", \"a\": {\"y\": {}, \"X\": []}}");
  // sort_keys: by code point, case-sensitive (upper case first).
  EXPECT_EQ(py_json_sorted(v), "{\"A\":\"é\\n\\\"\\u0001\x7f\",\"a\":{\"X\":[],\"y\":{}},\"b\":[1,2.5,null,true]}");
  EXPECT_EQ(py_json_sorted(ordered_json::parse(R"({"maxLength":1,"maximum":2,"aB":3,"a_b":4})")),
            R"({"aB":3,"a_b":4,"maxLength":1,"maximum":2})");
}


}  // namespace
}  // namespace deltafin::tokenizer
