#include "server/responses.h"

#include "server/api_error.h"
#include "tokenizer/utf8.h"

namespace deltafin::server {

namespace {

using ojson = nlohmann::ordered_json;

bool is_chat(const ResponseMeta& m) { return m.kind == RequestKind::Chat; }

ojson chunk_base(const ResponseMeta& m) {
  ojson j;
  j["id"] = m.id;
  j["object"] = is_chat(m) ? "chat.completion.chunk" : "text_completion";
  j["created"] = m.created;
  j["model"] = m.model;
  return j;
}

std::string frame(const ojson& j) { return "data: " + dump_json(j) + "\n\n"; }

ojson choice(const ResponseMeta& m, ojson delta_or_text, const ojson& finish, const std::span<const TokenLogprob>* lp) {
  ojson c;
  c["index"] = m.choice;
  if (is_chat(m)) c["delta"] = std::move(delta_or_text);
  else c["text"] = std::move(delta_or_text);
  c["logprobs"] = logprobs_json(m, lp);
  c["finish_reason"] = finish;
  return c;
}

std::string chunk(const ResponseMeta& m, ojson delta_or_text, const ojson& finish, bool include_usage,
                  const std::span<const TokenLogprob>* lp = nullptr) {
  ojson j = chunk_base(m);
  j["choices"] = ojson::array({choice(m, std::move(delta_or_text), finish, lp)});
  if (include_usage) j["usage"] = nullptr;
  return frame(j);
}

// {"index"?, "id", "type": "function", "function": {"name", "arguments"}}; streamed deltas carry the index.
ojson tool_call_json(const ToolCall& c, bool with_index) {
  ojson j;
  if (with_index) j["index"] = c.index;
  j["id"] = c.id;
  j["type"] = "function";
  j["function"] = {{"name", c.name}, {"arguments", c.arguments}};
  return j;
}

ojson bytes_of(const std::string& s) {
  ojson b = ojson::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

}  // namespace

ojson logprobs_json(const ResponseMeta& m, const std::span<const TokenLogprob>* lp) {
  if (!lp) return nullptr;
  if (is_chat(m)) {
    ojson content = ojson::array();
    for (const TokenLogprob& e : *lp) {
      ojson top = ojson::array();
      for (const TokenAlternative& a : e.top)
        top.push_back(ojson{{"token", a.text}, {"logprob", a.logprob}, {"bytes", bytes_of(a.text)}});
      content.push_back(
          ojson{{"token", e.text}, {"logprob", e.logprob}, {"bytes", bytes_of(e.text)}, {"top_logprobs", top}});
    }
    return ojson{{"content", content}, {"refusal", nullptr}};
  }
  ojson tokens = ojson::array(), values = ojson::array(), tops = ojson::array(), offsets = ojson::array();
  for (const TokenLogprob& e : *lp) {
    tokens.push_back(e.text);
    values.push_back(e.logprob);
    ojson top = ojson::object();
    for (const TokenAlternative& a : e.top) {
      // Keys as the client will read them (invalid UTF-8 replaced): two ids with one spelling keep the likelier.
      const std::string key = tokenizer::to_valid_utf8(a.text);
      if (!top.contains(key)) top[key] = a.logprob;
    }
    tops.push_back(top);
    offsets.push_back(e.text_offset);
  }
  return ojson{{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

ojson Usage::to_json() const {
  ojson u;
  u["prompt_tokens"] = prompt_tokens;
  u["completion_tokens"] = completion_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  u["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  return u;
}

ojson Timings::to_json() const {
  auto rate = [](double n, double s) { return n > 0 && s > 0 ? ojson(n / s) : ojson(nullptr); };
  ojson t;
  t["prefill_tokens"] = prefill_tokens;
  t["prefill_ms"] = prefill_seconds * 1e3;
  t["prefill_tokens_per_second"] = rate(double(prefill_tokens), prefill_seconds);
  t["completion_tokens"] = completion_tokens;
  t["decode_ms"] = decode_seconds * 1e3;
  t["decode_tokens_per_second"] = rate(double(completion_tokens - 1), decode_seconds);
  t["expert_bytes"] = expert_bytes;
  t["expert_mb_per_second"] = rate(double(expert_bytes) / 1e6, prefill_seconds + decode_seconds);
  return t;
}

ojson full_response(const ResponseMeta& m, const std::vector<Delta>& deltas, const std::string& finish_reason,
                    const Usage& usage, const std::span<const TokenLogprob>* lp, const Timings* timings) {
  std::string text, reasoning, content;
  ojson calls = ojson::array();
  for (const Delta& d : deltas) {
    if (d.channel == Channel::Text) text += d.text;
    else if (d.channel == Channel::Reasoning) reasoning += d.text;
    else if (d.channel == Channel::Tool) calls.push_back(tool_call_json(d.call, false));
    else content += d.text;
  }
  ojson j;
  j["id"] = m.id;
  j["object"] = is_chat(m) ? "chat.completion" : "text_completion";
  j["created"] = m.created;
  j["model"] = m.model;
  ojson c;
  c["index"] = m.choice;
  if (is_chat(m)) {
    c["message"] = {{"role", "assistant"}, {"content", content}, {"reasoning_content", reasoning}};
    if (!calls.empty()) c["message"]["tool_calls"] = std::move(calls);
  } else {
    c["text"] = text;
  }
  c["logprobs"] = logprobs_json(m, lp);
  c["finish_reason"] = finish_reason;
  j["choices"] = ojson::array({c});
  j["usage"] = usage.to_json();
  if (timings) j["timings"] = timings->to_json();
  return j;
}

std::string sse_opening(const ResponseMeta& m, bool include_usage) {
  if (!is_chat(m)) return "";
  return chunk(m, ojson{{"role", "assistant"}, {"content", ""}}, nullptr, include_usage);
}

std::string sse_delta(const ResponseMeta& m, const Delta& d, bool include_usage,
                      const std::span<const TokenLogprob>* lp) {
  if (!is_chat(m)) return chunk(m, d.text, nullptr, include_usage, lp);
  if (d.channel == Channel::Tool)  // a whole call in one chunk (its arguments are never split)
    return chunk(m, ojson{{"tool_calls", ojson::array({tool_call_json(d.call, true)})}}, nullptr, include_usage, lp);
  const char* key = d.channel == Channel::Reasoning ? "reasoning_content" : "content";
  return chunk(m, ojson{{key, d.text}}, nullptr, include_usage, lp);
}

std::string sse_finish(const ResponseMeta& m, const std::string& finish_reason, bool include_usage,
                       const std::span<const TokenLogprob>* lp) {
  return chunk(m, is_chat(m) ? ojson::object() : ojson(""), finish_reason, include_usage, lp);
}

std::string sse_usage(const ResponseMeta& m, const Usage& usage, const Timings* timings) {
  ojson j = chunk_base(m);
  j["choices"] = ojson::array();
  j["usage"] = usage.to_json();
  if (timings) j["timings"] = timings->to_json();
  return frame(j);
}

std::string sse_error(const std::string& message, const std::string& type, const std::string& code) {
  ApiError e;
  e.message = message;
  e.type = type;
  e.code = code;
  return frame(e.to_json());
}

}  // namespace deltafin::server
