// src/template/: what the e2e comparison with python3-jinja2
// (tests/e2e/jinja_language.sh, jinja_templates.sh) cannot show: constructs
// outside the subset fail at parse time naming the construct and line, the
// sandbox reaches nothing but its variables, and hostile templates end with
// a clear error within the limits. Expected texts are what python3-jinja2
// 3.1 renders with transformers' settings.
#include <gtest/gtest.h>

#include <string>

#include "template/template.h"

namespace deltafin::jinja {
namespace {

using nlohmann::ordered_json;

Result<std::string> render(const std::string& source, const ordered_json& vars = ordered_json::object(),
                           const Limits& limits = {}, const RenderOptions& options = {}) {
  auto t = Template::parse(source, limits);
  if (!t.ok()) return t.status();
  return t->render(vars, options);
}

void expect_error(const std::string& source, const std::string& needle, const Limits& limits = {},
                  const ordered_json& vars = ordered_json::object()) {
  auto r = render(source, vars, limits);
  ASSERT_FALSE(r.ok()) << source << " rendered " << r.value().substr(0, 200);
  EXPECT_NE(r.message().find(needle), std::string::npos) << source << " -> " << r.message();
}

TEST(JinjaTemplate, RendersChatShapedTemplate) {
  const std::string source =
      "{%- for m in messages %}\n"
      "  {%- if m.role == 'system' %}{{ '<sys>' + m.content|trim + '</sys>\\n' }}\n"
      "  {%- else %}{{ '<' ~ m.role ~ '>' ~ m.content ~ '\\n' }}{% endif %}\n"
      "{%- endfor %}\n"
      "{%- if add_generation_prompt %}<assistant>{% endif %}";
  const auto vars = ordered_json::parse(
      R"({"messages":[{"role":"system","content":"  be brief "},{"role":"user","content":"héllo"}],"add_generation_prompt":true})");
  auto r = render(source, vars);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "<sys>be brief</sys>\n<user>héllo\n<assistant>");
}

TEST(JinjaTemplate, DictsortCaseOption) {
  const auto vars = ordered_json::parse(R"({"d":{"b":1,"B":2,"a":3}})");
  auto jinja = render("{% for k, v in d|dictsort %}{{ k }}{% endfor %}", vars);
  ASSERT_TRUE(jinja.ok()) << jinja.message();
  EXPECT_EQ(*jinja, "abB");  // Jinja: case-insensitive, stable
  RenderOptions k3;
  k3.dictsort_case_sensitive = true;
  auto sensitive = render("{% for k, v in d|dictsort %}{{ k }}{% endfor %}", vars, {}, k3);
  ASSERT_TRUE(sensitive.ok()) << sensitive.message();
  EXPECT_EQ(*sensitive, "Bab");
}

TEST(JinjaTemplate, UnsupportedConstructsFailAtParseNamingThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"a\n{% include 'other.jinja' %}", "line 2: unsupported construct: the 'include' statement"},
      {"{% import 'os' as os %}", "the 'import' statement"},
      {"{% from 'x' import y %}", "the 'from' statement"},
      {"{% extends 'base' %}", "the 'extends' statement"},
      {"{% block body %}{% endblock %}", "the 'block' statement"},
      {"{% call m() %}x{% endcall %}", "the 'call' statement"},
      {"{% filter upper %}x{% endfilter %}", "the 'filter' statement"},
      {"{% with a = 1 %}{% endwith %}", "the 'with' statement"},
      {"{% raw %}{{ x }}{% endraw %}", "the raw block"},
      {"x\n\n{% for a in b recursive %}{% endfor %}", "line 3: unsupported construct: recursive for loops"},
      {"{{ x|wordwrap(10) }}", "unsupported filter 'wordwrap'"},
      {"{{ x is escapedd }}", "unsupported test 'escapedd'"},
      {"{{ f(*args) }}", "*args and **kwargs"},
      {"{% set x | upper %}a{% endset %}", "filters on a block set"},
      {"{% frobnicate %}", "unknown statement 'frobnicate'"},
      {"{% if x %}never closed", "missing {% endif %}"},
  };
  for (const auto& [source, needle] : cases) {
    auto t = Template::parse(source);
    ASSERT_FALSE(t.ok()) << source;
    EXPECT_NE(t.message().find(needle), std::string::npos) << source << " -> " << t.message();
  }
  // Constructs that only show at run time name themselves too.
  expect_error("{{ 'a %s' % x }}", "unsupported construct: '%' string formatting", {}, {{"x", 1}});
  expect_error("{{ cycler('a') }}", "unsupported construct: the global function cycler()");
  expect_error("{{ 'x'.zfill(3) }}", "unsupported construct: the string method str.zfill()");
  expect_error("{{ 'É'.lower() }}", "non-ASCII text is not supported");
}

TEST(JinjaTemplate, ReachesNothingButItsVariables) {
  // Python's object graph is not there: dunder attributes are undefined (as
  // in Jinja's sandbox), and there is no loader, environment or clock.
  for (const char* source : {"{{ ''.__class__ }}", "{{ range.__globals__ }}", "{{ namespace.__init__ }}",
                             "{{ config }}{{ request }}{{ os }}{{ self }}{{ environment }}{{ settings }}",
                             "{{ messages.__class__ }}"}) {
    auto r = render(source, {{"messages", ordered_json::array()}});
    ASSERT_TRUE(r.ok()) << source << ": " << r.message();
    EXPECT_EQ(*r, "") << source;
  }
  expect_error("{{ ''.__class__.__mro__ }}", "has no attribute '__class__'");
  expect_error("{{ strftime_now('%Y') }}", "needs a clock");
  expect_error("{{ xs.append(1) }}", "unsafe", {}, {{"xs", ordered_json::array()}});
  // Values are immutable: a template cannot change its caller's data.
  auto r = render("{% set m = messages[0] %}{% set m = 'x' %}{{ messages[0].role }}",
                  {{"messages", ordered_json::parse(R"([{"role":"user"}])")}});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(*r, "user");
}

TEST(JinjaTemplate, UnboundedMacroRecursionStops) {
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nest deeper than 100");
  expect_error("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
               "macro calls nest deeper");
  // Expressions nested inside each recursive call: the evaluation depth
  // (not only the macro depth) is bounded, so the C++ stack is too.
  expect_error("{% macro f(n) %}{{ " + std::string(120, '[') + "f(n + 1)" + std::string(120, ']') +
                   " }}{% endmacro %}{{ f(0) }}",
               "nest deeper than 1000");
  // A legitimate recursion within the limit renders.
  auto r = render("{% macro d(n) %}{% if n > 0 %}({{ d(n - 1) }}){% endif %}{% endmacro %}{{ d(50) }}");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->size(), 100u);
}

TEST(JinjaTemplate, HugeRangesAndLoopsStop) {
  expect_error("{% for i in range(10 ** 12) %}x{% endfor %}", "Range too big");
  expect_error("{% for i in range(-5, 10 ** 18) %}x{% endfor %}", "MAX_RANGE (100000)");
  // Nested loops within MAX_RANGE: the step budget ends them.
  Limits small;
  small.max_steps = 20'000;
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
               "more than 20000 steps", small);
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% if j is odd %}{% endif %}{% endfor %}"
               "{% endfor %}",
               "steps", small);
}

TEST(JinjaTemplate, HugeOutputAndValuesStop) {
  // The default cap on any string, the output included: 64 MiB.
  expect_error("{{ 'x' * 40000000 }}{{ 'x' * 40000000 }}", "more than 67108864 bytes");
  expect_error("{{ 'x' * (10 ** 15) }}", "more than 67108864 bytes");
  expect_error("{{ [0] * (10 ** 12) }}", "more than 1048576 items");
  // Gigabytes of output from a loop: the first write past the cap ends it
  // (a smaller cap here, to keep the test fast under sanitizers).
  Limits small;
  small.max_output_bytes = 4u << 20;
  small.max_items = 1u << 12;
  small.max_bytes_built = 64u << 20;
  expect_error("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "more than 4194304 bytes", small);
  // Doubling a string or a list: caught at the limit, not after.
  expect_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               "more than 4194304 bytes", small);
  expect_error("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
               "more than 4096 items", small);
  // Many big temporaries, each within the caps: the bytes-built budget bounds the work.
  expect_error("{% for i in range(100000) %}{% set s = 'x' * 4000000 %}{% endfor %}", "more than 67108864 bytes of values",
               small);
  // A macro's output counts as output too.
  expect_error("{% macro big() %}{{ 'y' * 3000000 }}{{ 'y' * 3000000 }}{% endmacro %}{{ big() }}",
               "more than 4194304 bytes", small);
}

TEST(JinjaTemplate, DeepNestingStops) {
  expect_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "nests too deeply");
  std::string ifs;
  for (int k = 0; k < 5000; ++k) ifs += "{% if true %}";
  expect_error(ifs, "nests too deeply");
  expect_error("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}",
               "nest deeper than 256");
  expect_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nests too deeply to print");
  ordered_json deep = ordered_json::array();
  for (int k = 0; k < 2000; ++k) {
    ordered_json outer = ordered_json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  expect_error("{{ x }}", "nests too deeply", {}, {{"x", deep}});
}

TEST(JinjaTemplate, ErrorsCarryTheLine) {
  expect_error("line one\n{{ 1 // 0 }}", "line 2: integer division or modulo by zero");
  expect_error("\n\n{{ raise_exception('no tools allowed') }}", "line 3: no tools allowed");
  expect_error("{{ missing.attr }}", "'missing' is undefined");
  expect_error("{{ 9223372036854775807 + 1 }}", "integer overflow");
}

}  // namespace
}  // namespace deltafin::jinja
