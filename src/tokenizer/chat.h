// K3 chat rendering ("XTML", docs/design/tokenizer.md): messages -> segments, each encoded
// separately (control segments with specials enabled, ordinary ones without)
// so that no message text can forge a tag. The rendered bytes are exactly
// those of K3's published chat template (chat_template_text.h; the rules are
// in docs/design/tokenizer.md), checked against python3-jinja2 in the tests.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::tokenizer {

// The template's variables besides `messages`.
struct ChatOptions {
  bool thinking = true;
  // "low" | "high" | "max"; nullopt (the template's none) renders no
  // thinking-effort message. Anything else is an error when thinking.
  std::optional<std::string> thinking_effort = std::string("max");
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;            // null = not given; else the request's `tools`
  nlohmann::ordered_json tool_choice;      // "required" / "none" add a message
  nlohmann::ordered_json response_format;  // {"type": "json_object" | "json_schema", ...} or a type string
};

struct ChatSegment {
  bool control;
  std::string text;
  bool operator==(const ChatSegment&) const = default;
};

// OpenAI-style messages: [{"role", "content", "name", "reasoning_content",
// "tool_calls", "tool_call_id"}...]. Errors name the message index.
Result<std::vector<ChatSegment>> render_chat(const nlohmann::ordered_json& messages, const ChatOptions& options);

// The rendered string: every segment's text, concatenated.
std::string chat_text(const std::vector<ChatSegment>& segments);

// render_chat, then each segment encoded on its own; large chats encode
// segments on threads (same ids as sequential).
Result<std::vector<uint32_t>> encode_chat(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                                          const ChatOptions& options = {});
Result<std::vector<uint32_t>> encode_segments(const Tokenizer& tokenizer, const std::vector<ChatSegment>& segments,
                                              bool parallel = true);

// Ids that end generation: <|end_of_msg|> (docs/design/tokenizer.md).
Result<std::vector<uint32_t>> chat_stop_ids(const Tokenizer& tokenizer);

}  // namespace deltafin::tokenizer
