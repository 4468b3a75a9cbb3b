// A checkpoint's chat template and the variables transformers gives it:
// the template from tokenizer_config.json's `chat_template` (a string, or
// a list of {name, template} where "default" is used) or from a
// chat_template.jinja file, and the special tokens (bos_token, eos_token,
// ...) that apply_chat_template passes along with the messages.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace deltafin::jinja {

struct ChatTemplateSource {
  std::string text;                     // the Jinja source
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // name -> string
};

// path: a .jinja file (taken as is), a tokenizer_config.json, or a checkpoint
// directory (its chat_template.jinja if present, else its tokenizer_config.json).
Result<ChatTemplateSource> load_chat_template(const std::string& path);

// The variables for a render: `vars` as given, with the special tokens
// added where vars does not name them.
nlohmann::ordered_json with_special_tokens(nlohmann::ordered_json vars, const ChatTemplateSource& source);

}  // namespace deltafin::jinja
