// OpenAI response bodies and SSE chunks built from deltas, so that a fresh
// generation and a memo replay produce the same bytes.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/engine.h"
#include "server/output_filter.h"
#include "server/request.h"

namespace deltafin::server {

struct ResponseMeta {
  RequestKind kind = RequestKind::Chat;
  std::string id, model;
  int64_t created = 0;
  int choice = 0;  // the choice's index (n > 1)
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  nlohmann::ordered_json to_json() const;
};

// Where a fresh answer's time went ("timings", a Deltafin extension in the
// style of llama.cpp's server; clients that do not know it ignore it). Not
// sent for memo replays, which do no model work.
struct Timings {
  int64_t prefill_tokens = 0, completion_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;  // decode: the completion_tokens - 1 steps after the first
  uint64_t expert_bytes = 0;                       // routed expert bytes the answer used
  nlohmann::ordered_json to_json() const;
};

// A choice's "logprobs": chat {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null};
// completions {"tokens", "token_logprobs", "top_logprobs" ({text: logprob} each), "text_offset"}.
// Null when the request did not ask for them (`lp` null).
nlohmann::ordered_json logprobs_json(const ResponseMeta& m, const std::span<const TokenLogprob>* lp);

// Non-streaming body: all deltas joined per channel.
nlohmann::ordered_json full_response(const ResponseMeta& m, const std::vector<Delta>& deltas,
                                     const std::string& finish_reason, const Usage& usage,
                                     const std::span<const TokenLogprob>* lp = nullptr,
                                     const Timings* timings = nullptr);

// SSE frames ("data: ...\n\n"). Chat opens with a role chunk; completions do not.
// A delta or the finish chunk carries the log probabilities of the tokens
// decided since the previous chunk that carried some (`lp` null: none asked).
std::string sse_opening(const ResponseMeta& m, bool include_usage);
std::string sse_delta(const ResponseMeta& m, const Delta& d, bool include_usage,
                      const std::span<const TokenLogprob>* lp = nullptr);
std::string sse_finish(const ResponseMeta& m, const std::string& finish_reason, bool include_usage,
                       const std::span<const TokenLogprob>* lp = nullptr);
std::string sse_usage(const ResponseMeta& m, const Usage& usage, const Timings* timings = nullptr);
std::string sse_error(const std::string& message, const std::string& type, const std::string& code);
inline const char* sse_done() { return "data: [DONE]\n\n"; }

}  // namespace deltafin::server
