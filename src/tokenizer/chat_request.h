// Chat-completions request fields that decide the rendered prompt: messages,
// tools, tool_choice, response_format, reasoning_effort and
// chat_template_kwargs ({"thinking": bool, "thinking_effort": "low" | "high" |
// "max" | null}, the vLLM convention). Shared by `deltafin render-chat` and
// the server, so both render a request the same way.
#pragma once
#include <nlohmann/json.hpp>

#include "core/result.h"
#include "tokenizer/chat.h"

namespace deltafin::tokenizer {

struct ChatRequest {
  nlohmann::ordered_json messages;
  ChatOptions options;
};

// Applies `chat_template_kwargs` (null or an object) to `options`. Strict:
// unknown keys and wrong types or values are errors naming the key.
Status apply_chat_template_kwargs(const nlohmann::ordered_json& kwargs, ChatOptions& options);

// The rendering fields of a request body; other fields (model, max_tokens,
// ...) do not change the prompt and are ignored here.
Result<ChatRequest> chat_request_from_json(const nlohmann::ordered_json& body);

}  // namespace deltafin::tokenizer
