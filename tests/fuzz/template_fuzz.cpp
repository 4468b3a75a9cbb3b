// libFuzzer target: the chat-template engine (src/template/: lexer, parser,
// interpreter, filters, methods, JSON in and out). An input is a template,
// optionally followed by a NUL byte and a JSON object of its variables; with
// no NUL, or variables that are not a JSON object, the template gets a
// typical chat's variables. Any input must give a rendered text or an error
// value: never a crash, a sanitizer report, a hang or unbounded memory.
// Built and run by tests/fuzz/fuzz_lib.sh (tests/e2e/fuzz_parsers.sh,
// tests/fuzz/template_fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/template.h"

namespace {

using ojson = nlohmann::ordered_json;

const ojson& chat_vars() {
  static const ojson vars = ojson::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi <think> {{ x }}"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello", "reasoning_content": "hm",
       "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"q": [1, 2.5, null, true]}}},
                      {"function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
      {"role": "tool", "content": "{\"ok\": true}", "tool_call_id": "c1"},
      {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get", "description": "d",
               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
    "add_generation_prompt": true,
    "enable_thinking": false,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })");
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace jinja = deltafin::jinja;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);

  // Tighter than the defaults so that each input runs in milliseconds: the
  // limits are what is under test, not their size. The stack guards
  // (max_nesting, max_recursion, max_call_depth) keep their defaults.
  jinja::Limits limits;
  limits.max_output_bytes = 1u << 20;
  limits.max_steps = 200'000;
  limits.max_bytes_built = 32u << 20;
  limits.max_items = 1u << 16;

  auto tmpl = jinja::Template::parse(source, limits);
  if (!tmpl.ok()) return 0;

  ojson vars;
  if (nul != std::string_view::npos) vars = ojson::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
  const ojson& used = vars.is_object() ? vars : chat_vars();

  jinja::RenderOptions options;
  options.now = 1'700'000'000;  // strftime_now works, deterministically
  (void)tmpl->render(used, options);
  options.dictsort_case_sensitive = true;
  options.now.reset();
  (void)tmpl->render(used, options);
  return 0;
}
