// The Anthropic Messages API (POST /v1/messages) on the same engine: a request
// is translated into the equivalent chat-completions body (then validated,
// rendered and generated exactly as one), and the outcome is written back as
// an Anthropic message or its SSE event stream (docs/guide/serving.md).
#pragma once
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/output_filter.h"

namespace deltafin::server {

// {"type": "error", "error": {"type", "message"}}, the type from the status.
std::string anthropic_error_body(const ApiError& e);

// The chat-completions body for an Anthropic request, or a 400 naming the field.
std::variant<nlohmann::ordered_json, ApiError> anthropic_to_chat(std::string_view body);

struct AnthropicOutcome {
  std::string id, model;
  std::string finish_reason;   // the engine's: "stop" | "length" | "tool_calls"
  std::string stop_sequence;   // the stop string that ended it, if one did
  int64_t input_tokens = 0, output_tokens = 0;
};

// "end_turn" | "max_tokens" | "stop_sequence" | "tool_use".
std::string anthropic_stop_reason(const AnthropicOutcome& o);

// The whole message: thinking, text and tool_use blocks from the deltas.
nlohmann::ordered_json anthropic_message(const AnthropicOutcome& o, const std::vector<Delta>& deltas);

// The event stream: message_start, then a content block per run of deltas of
// one kind (thinking, text, each tool call), then message_delta and message_stop.
class AnthropicStream {
 public:
  std::string start(const std::string& id, const std::string& model, int64_t input_tokens);
  std::string push(const Delta& d);
  std::string finish(const AnthropicOutcome& o);
  static std::string error(const ApiError& e);

 private:
  std::string close_block();
  enum class Open : uint8_t { None, Thinking, Text };
  Open open_ = Open::None;
  int index_ = -1;
};

}  // namespace deltafin::server
