// Chat templates as transformers' apply_chat_template renders them: a Jinja
// interpreter for the subset chat templates use, configured like
// transformers' ImmutableSandboxedEnvironment (trim_blocks, lstrip_blocks,
// loopcontrols, tojson as json.dumps(ensure_ascii=False), raise_exception).
// A template reaches only the variables it is given; limits bound its time,
// memory and output.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace deltafin::jinja {

struct Limits {
  uint64_t max_output_bytes = 64ull << 20;  // any one string, the output included
  uint64_t max_steps = 10'000'000;          // expression evaluations and loop iterations
  uint64_t max_bytes_built = 1ull << 30;    // all strings and list items built, summed
  uint64_t max_items = 1u << 20;            // any one list or dict
  int max_call_depth = 100;                 // nested macro calls (each costs C++ stack)
  int max_nesting = 256;                    // nested statements and expressions in the source
  int max_recursion = 1000;                 // nested evaluations at run time: bounds the C++ stack
};

struct RenderOptions {
  // Jinja's dictsort compares keys ignoring case; K3's reference compares
  // them as json.dumps(sort_keys=True) does.
  bool dictsort_case_sensitive = false;
  // strftime_now(format) formats this time (seconds since the epoch, local
  // time); unset, strftime_now fails: the template sees no clock it is not given.
  std::optional<int64_t> now;
};

struct Node;
class Template {
 public:
  // Fails on syntax errors and on constructs outside the supported subset,
  // naming the construct and its line.
  static Result<Template> parse(std::string_view source, const Limits& limits = {});
  // vars: a JSON object of the template's variables (messages, tools,
  // add_generation_prompt, bos_token, ...).
  Result<std::string> render(const nlohmann::ordered_json& vars, const RenderOptions& options = {}) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
  Limits limits_;
};

}  // namespace deltafin::jinja
