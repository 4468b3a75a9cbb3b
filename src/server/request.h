// Strict validation of /v1/chat/completions and /v1/completions bodies: every
// accepted field and value is listed in docs/guide/serving.md; anything else is a
// 400 naming the field, decided before the model is entered.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/sampler.h"

#include "server/api_error.h"

namespace deltafin::server {

enum class RequestKind { Chat, Completion };

struct ValidationLimits {
  std::string model_name;  // the one advertised id
  int max_tokens = 4096;   // server ceiling (--max-tokens)
  int completion_default_max_tokens = 256;
  // Chat bodies with more messages are refused before they are parsed into a
  // tree (0: no limit). The server derives it from --max-context.
  size_t max_messages = 0;
  // Completion bodies whose "prompt" has more bytes than this are refused
  // before they are parsed (0: no limit): every token is at most the longest
  // token's bytes, so such a prompt needs more tokens than the context holds.
  // The server sets it to --max-context x the longest token.
  size_t max_prompt_bytes = 0;
  size_t max_token_bytes = 1;  // for the message: the prompt has at least bytes / this tokens
  int max_context = 0;         // for the message
};

struct GenRequest {
  RequestKind kind = RequestKind::Chat;
  std::string prompt;                     // completion
  nlohmann::ordered_json messages;        // chat: validated, content parts kept
  // chat: the template's thinking switch and effort ("low" | "high" | "max";
  // nullopt renders no effort message), from chat_template_kwargs or
  // reasoning_effort.
  bool thinking = true;
  std::optional<std::string> thinking_effort = std::string("max");
  int max_tokens = 0;
  int n = 1;  // choices, generated one after another (1..16; not memoised above 1)
  std::vector<std::string> stop;  // stop strings (at most 4, none empty): docs/guide/serving.md
  // temperature, top_p, top_k, min_p, penalties, seed (generate/sampler.h).
  // A sampled request without a seed gets one drawn at random (`seeded`
  // false): its answer is not memoised.
  SamplingParams sampling;
  bool seeded = false;
  // Log probabilities of every generated token (chat: logprobs true; completions:
  // logprobs N), with the top_logprobs (chat, 0..20) or N (completions, 0..5)
  // likeliest alternatives. Such requests are not memoised.
  bool logprobs = false;
  int top_logprobs = 0;
  // chat: the declared tools (null: none) and tool_choice ("", "auto", "none",
  // "required"), rendered by the template; the model's calls come back as
  // tool_calls (server/tool_calls.h).
  nlohmann::ordered_json tools;
  std::string tool_choice;
  bool stream = false;
  bool include_usage = false;
  // Everything that decides the output, canonically encoded and hashed (the memo key).
  std::string memo_key;  // empty: not memoised
};

using Validated = std::variant<GenRequest, ApiError>;

// `body` is the raw request body.
Validated validate_request(RequestKind kind, std::string_view body, const ValidationLimits& limits);

}  // namespace deltafin::server
