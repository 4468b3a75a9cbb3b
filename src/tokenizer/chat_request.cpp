#include "tokenizer/chat_request.h"

#include <algorithm>

#include "tokenizer/chat_template_text.h"

namespace deltafin::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;

bool known_effort(const std::string& e) {
  return std::find(std::begin(k3::kEfforts), std::end(k3::kEfforts), e) != std::end(k3::kEfforts);
}

}  // namespace

Status apply_chat_template_kwargs(const ojson& kwargs, ChatOptions& options) {
  if (kwargs.is_null()) return {};
  if (!kwargs.is_object()) return error("chat_template_kwargs must be an object");
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    const std::string& k = it.key();
    const ojson& v = it.value();
    if (k == "thinking" || k == "enable_thinking") {
      // enable_thinking: Qwen3's templates' name for the same switch (clients of vLLM send it).
      if (!v.is_boolean()) return error("chat_template_kwargs.{} must be a boolean", k);
      const char* other = k == "thinking" ? "enable_thinking" : "thinking";
      if (kwargs.contains(other) && kwargs[other] != v)
        return error("chat_template_kwargs.thinking and enable_thinking disagree");
      options.thinking = v.get<bool>();
    } else if (k == "thinking_effort") {
      if (v.is_null()) {
        options.thinking_effort.reset();
      } else if (!v.is_string() || !known_effort(v.get<std::string>())) {
        return error("chat_template_kwargs.thinking_effort must be \"low\", \"high\", \"max\" or null");
      } else {
        options.thinking_effort = v.get<std::string>();
      }
    } else {
      return error("chat_template_kwargs.{} is not supported (supported: thinking, enable_thinking, thinking_effort)", k);
    }
  }
  return {};
}

Result<ChatRequest> chat_request_from_json(const ojson& body) {
  if (!body.is_object()) return error("the request must be a JSON object");
  if (!body.contains("messages")) return error("the request has no 'messages'");
  ChatRequest r;
  r.messages = body["messages"];
  if (!r.messages.is_array()) return error("'messages' must be an array");
  const auto field = [&](const char* k) { return body.contains(k) ? body[k] : ojson(); };
  r.options.tools = field("tools");
  if (!r.options.tools.is_null() && !r.options.tools.is_array()) return error("'tools' must be an array or null");
  r.options.tool_choice = field("tool_choice");
  r.options.response_format = field("response_format");
  const ojson effort = field("reasoning_effort");
  if (!effort.is_null()) {
    if (!effort.is_string() || !known_effort(effort.get<std::string>()))
      return error("'reasoning_effort' must be \"low\", \"high\" or \"max\"");
    r.options.thinking_effort = effort.get<std::string>();
  }
  const ojson kwargs = field("chat_template_kwargs");
  if (!effort.is_null() && kwargs.is_object() && kwargs.contains("thinking_effort"))
    return error("give either 'reasoning_effort' or 'chat_template_kwargs.thinking_effort', not both");
  DF_TRY(apply_chat_template_kwargs(kwargs, r.options));
  return r;
}

}  // namespace deltafin::tokenizer
