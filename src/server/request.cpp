#include "server/request.h"

#include <algorithm>
#include <cctype>
#include <random>
#include <fmt/format.h>

#include "server/json_body.h"
#include "server/memo.h"
#include "tokenizer/chat_request.h"

namespace deltafin::server {

namespace {

constexpr int64_t kMaxChoices = 16;  // `n`

using ojson = nlohmann::ordered_json;

constexpr int kMaxJsonDepth = 64;  // deeper bodies are refused before a tree is built

std::string type_name(const ojson& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

ApiError wrong_type(const std::string& param, const std::string& expected, const ojson& v) {
  return bad_request(fmt::format("'{}' must be {}, got {}", param, expected, type_name(v)), param, "invalid_type");
}

ApiError unsupported(const std::string& param, const std::string& what) {
  return bad_request(fmt::format("'{}': {}", param, what), param, "unsupported_value");
}

// A number within [lo, hi] or null.
std::optional<ApiError> check_range(const ojson& v, const std::string& param, double lo, double hi) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) return wrong_type(param, "a number or null", v);
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    return bad_request(fmt::format("'{}' must be between {} and {}", param, lo, hi), param, "invalid_value");
  return std::nullopt;
}

// A number within [lo, hi] into `out`; null leaves the default.
std::optional<ApiError> read_number(const ojson& v, const std::string& param, double lo, double hi, double& out) {
  if (auto e = check_range(v, param, lo, hi)) return e;
  if (!v.is_null()) out = v.get<double>();
  return std::nullopt;
}

// max_tokens-style integer: 1..ceiling.
// `stop`: null, a string, or an array of at most 4 strings; none empty.
std::optional<ApiError> read_stop(const ojson& v, std::vector<std::string>& out) {
  constexpr size_t kMaxStops = 4, kMaxStopBytes = 1024;
  out.clear();
  if (v.is_null()) return std::nullopt;
  if (!v.is_string() && !v.is_array()) return wrong_type("stop", "a string, an array of strings or null", v);
  const ojson list = v.is_string() ? ojson::array({v}) : v;
  if (list.size() > kMaxStops)
    return bad_request(fmt::format("'stop' has {} entries; at most {} are allowed", list.size(), kMaxStops), "stop",
                       "invalid_value");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string param = v.is_string() ? "stop" : fmt::format("stop[{}]", i);
    if (!list[i].is_string()) return wrong_type(param, "a string", list[i]);
    const std::string& s = list[i].get_ref<const std::string&>();
    if (s.empty()) return bad_request(fmt::format("'{}' must not be empty", param), "stop", "invalid_value");
    if (s.size() > kMaxStopBytes)
      return bad_request(fmt::format("'{}' is longer than {} bytes", param, kMaxStopBytes), "stop", "invalid_value");
    out.push_back(s);
  }
  return std::nullopt;
}

std::optional<ApiError> read_max_tokens(const ojson& v, const std::string& param, int ceiling, int& out) {
  if (!(v.is_number_integer() || v.is_number_unsigned())) return wrong_type(param, "an integer", v);
  if ((!v.is_number_unsigned() && v.get<int64_t>() < 1) || (v.is_number_unsigned() && v.get<uint64_t>() == 0))
    return bad_request(fmt::format("'{}' must be at least 1", param), param, "invalid_value");
  const uint64_t n = v.get<uint64_t>();
  if (n > uint64_t(ceiling))
    return bad_request(fmt::format("'{}' is {}, above this server's limit of {} (--max-tokens)", param, n, ceiling),
                       param, "invalid_value");
  out = int(n);
  return std::nullopt;
}

std::string trim_lower(std::string s) {
  auto sp = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && sp(s.back())) s.pop_back();
  size_t b = 0;
  while (b < s.size() && sp(s[b])) ++b;
  s = s.substr(b);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<ApiError> check_content(const ojson& m, const std::string& p, bool null_ok) {
  if (!m.contains("content")) {
    if (null_ok) return std::nullopt;
    return bad_request(fmt::format("'{}.content' is required", p), p + ".content", "missing_required_parameter");
  }
  const ojson& c = m["content"];
  const std::string pc = p + ".content";
  if (c.is_string()) return std::nullopt;
  if (c.is_null()) {
    if (null_ok) return std::nullopt;
    return wrong_type(pc, "a string or an array of text parts", c);
  }
  if (!c.is_array()) return wrong_type(pc, "a string or an array of text parts", c);
  for (size_t j = 0; j < c.size(); ++j) {
    const ojson& part = c[j];
    const std::string pp = fmt::format("{}[{}]", pc, j);
    if (!part.is_object()) return wrong_type(pp, "an object", part);
    if (!part.contains("type")) return bad_request(fmt::format("'{}.type' is required", pp), pp + ".type",
                                                   "missing_required_parameter");
    const ojson& t = part["type"];
    if (!t.is_string()) return wrong_type(pp + ".type", "a string", t);
    if (t.get<std::string>() != "text")
      return bad_request(fmt::format("'{}.type' is '{}': only text content is supported", pp, t.get<std::string>()),
                         pp + ".type", "unsupported_content_type");
    for (auto it = part.begin(); it != part.end(); ++it)
      if (it.key() != "type" && it.key() != "text")
        return bad_request(fmt::format("'{}.{}' is not supported", pp, it.key()), pp + "." + it.key(),
                           "unknown_parameter");
    if (!part.contains("text") || !part["text"].is_string())
      return bad_request(fmt::format("'{}.text' must be a string", pp), pp + ".text", "invalid_type");
  }
  return std::nullopt;
}

std::optional<ApiError> check_tool_calls(const ojson& v, const std::string& p) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return wrong_type(p, "an array", v);
  for (size_t j = 0; j < v.size(); ++j) {
    const ojson& call = v[j];
    const std::string pp = fmt::format("{}[{}]", p, j);
    if (!call.is_object()) return wrong_type(pp, "an object", call);
    for (auto it = call.begin(); it != call.end(); ++it) {
      const std::string& k = it.key();
      const ojson& x = it.value();
      if (k == "id") {
        if (!x.is_string()) return wrong_type(pp + ".id", "a string", x);
      } else if (k == "type") {
        if (x != "function") return unsupported(pp + ".type", "only \"function\" is supported");
      } else if (k == "index") {
        if (!x.is_number_unsigned()) return wrong_type(pp + ".index", "a non-negative integer", x);
      } else if (k == "function") {
        if (!x.is_object()) return wrong_type(pp + ".function", "an object", x);
        for (auto f = x.begin(); f != x.end(); ++f)
          if ((f.key() != "name" && f.key() != "arguments") || !f.value().is_string())
            return bad_request(fmt::format("'{}.function.{}' is not allowed (name and arguments, strings)", pp, f.key()),
                               pp + ".function." + f.key(), "invalid_value");
        if (!x.contains("name")) return bad_request(fmt::format("'{}.function.name' is required", pp),
                                                    pp + ".function.name", "missing_required_parameter");
      } else {
        return bad_request(fmt::format("'{}.{}' is not supported", pp, k), pp + "." + k, "unknown_parameter");
      }
    }
  }
  return std::nullopt;
}

std::optional<ApiError> check_messages(const ojson& msgs) {
  if (!msgs.is_array()) return wrong_type("messages", "an array", msgs);
  if (msgs.empty()) return bad_request("'messages' must contain at least one message", "messages", "invalid_value");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ojson& m = msgs[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(p, "an object", m);
    if (!m.contains("role")) return bad_request(fmt::format("'{}.role' is required", p), p + ".role",
                                                "missing_required_parameter");
    if (!m["role"].is_string()) return wrong_type(p + ".role", "a string", m["role"]);
    const std::string role = m["role"].get<std::string>();
    std::vector<std::string> allowed;
    if (role == "system" || role == "user") allowed = {"role", "content", "name"};
    else if (role == "assistant") allowed = {"role", "content", "name", "reasoning_content", "tool_calls"};
    else if (role == "tool") allowed = {"role", "content", "name", "tool_call_id"};
    else
      return bad_request(fmt::format("'{}.role' is '{}': supported roles are system, user, assistant, tool", p, role),
                         p + ".role", "invalid_value");
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end())
        return bad_request(fmt::format("'{}.{}' is not supported for role '{}'", p, it.key(), role),
                           p + "." + it.key(), "unknown_parameter");
    }
    if (auto e = check_content(m, p, role == "assistant")) return e;
    for (const char* k : {"name", "tool_call_id"})
      if (m.contains(k) && !m[k].is_string()) return wrong_type(p + "." + k, "a string", m[k]);
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_string() && !m["reasoning_content"].is_null())
      return wrong_type(p + ".reasoning_content", "a string or null", m["reasoning_content"]);
    if (m.contains("tool_calls"))
      if (auto e = check_tool_calls(m["tool_calls"], p + ".tool_calls")) return e;
  }
  return std::nullopt;
}

// `tools`: null or an array of {"type": "function", "function": {"name", "description"?,
// "parameters"? (an object), "strict"?}}; names as OpenAI allows them.
std::optional<ApiError> check_tools(const ojson& v) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return wrong_type("tools", "an array or null", v);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = fmt::format("tools[{}]", i);
    const ojson& t = v[i];
    if (!t.is_object()) return wrong_type(p, "an object", t);
    for (auto it = t.begin(); it != t.end(); ++it)
      if (it.key() != "type" && it.key() != "function")
        return bad_request(fmt::format("'{}.{}' is not supported", p, it.key()), p + "." + it.key(),
                           "unknown_parameter");
    if (!t.contains("type") || t["type"] != "function")
      return unsupported(p + ".type", "only \"function\" tools are supported");
    if (!t.contains("function") || !t["function"].is_object())
      return wrong_type(p + ".function", "an object", t.value("function", ojson()));
    const ojson& f = t["function"];
    for (auto it = f.begin(); it != f.end(); ++it) {
      const std::string& k = it.key();
      if (k != "name" && k != "description" && k != "parameters" && k != "strict")
        return bad_request(fmt::format("'{}.function.{}' is not supported", p, k), p + ".function." + k,
                           "unknown_parameter");
    }
    if (!f.contains("name") || !f["name"].is_string())
      return wrong_type(p + ".function.name", "a string", f.value("name", ojson()));
    const std::string& name = f["name"].get_ref<const std::string&>();
    const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (!ok)
      return bad_request(fmt::format("'{}.function.name' must be 1 to 64 of a-z, A-Z, 0-9, _ and -", p),
                         p + ".function.name", "invalid_value");
    if (f.contains("description") && !f["description"].is_string() && !f["description"].is_null())
      return wrong_type(p + ".function.description", "a string", f["description"]);
    if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null())
      return wrong_type(p + ".function.parameters", "an object", f["parameters"]);
    if (f.contains("strict") && !f["strict"].is_boolean() && !f["strict"].is_null())
      return wrong_type(p + ".function.strict", "a boolean", f["strict"]);
  }
  return std::nullopt;
}

using MaybeError = std::optional<ApiError>;

// The body's shape, checked in one pass that builds nothing (linear time,
// little memory), before any JSON tree is built.
MaybeError check_body_shape(bool chat, std::string_view body, const ValidationLimits& limits) {
  const BodyShape shape = scan_body(body, kMaxJsonDepth, chat ? limits.max_messages : 0);
  if (shape.too_deep)
    return bad_request(fmt::format("the request body nests deeper than {} levels", kMaxJsonDepth), std::nullopt,
                       "invalid_json");
  if (shape.too_many_messages)
    return bad_request(fmt::format("'messages' has more than {} messages, more than fit in this server's context "
                                   "(--max-context)", limits.max_messages),
                       "messages", "context_length_exceeded");
  if (!chat && limits.max_prompt_bytes != 0 && shape.prompt_bytes > limits.max_prompt_bytes) {
    const size_t at_least = (shape.prompt_bytes + limits.max_token_bytes - 1) / limits.max_token_bytes;
    return bad_request(fmt::format("the prompt has at least {} tokens ({} bytes), over this server's context limit "
                                   "of {}", at_least, shape.prompt_bytes, limits.max_context),
                       "prompt", "context_length_exceeded");
  }
  return std::nullopt;
}

// Reads a parsed body's fields, one at a time, into a GenRequest: the fields
// both endpoints share, then those of completions or of chat; then the checks
// that need several fields.
class RequestReader {
 public:
  RequestReader(RequestKind kind, const ValidationLimits& limits) : chat_(kind == RequestKind::Chat), limits_(limits) {
    r_.kind = kind;
    r_.max_tokens = chat_ ? limits.max_tokens : std::min(limits.completion_default_max_tokens, limits.max_tokens);
  }

  MaybeError read_field(const std::string& k, ojson& v) {
    if (auto e = read_shared_field(k, v); e || handled_) return e;
    return chat_ ? read_chat_field(k, v) : read_completion_field(k, v);
  }

  MaybeError check_combinations(const ojson& root) {
    if (kwargs_effort_) {
      if (root.contains("reasoning_effort") && !root["reasoning_effort"].is_null())
        return bad_request("give either 'reasoning_effort' or 'chat_template_kwargs.thinking_effort', not both",
                           "chat_template_kwargs", "invalid_value");
      r_.thinking_effort = *kwargs_effort_;
    }
    if (!r_.tool_choice.empty() && r_.tool_choice != "auto" && r_.tools.is_null())
      return bad_request("'tool_choice' is only allowed when 'tools' are given", "tool_choice", "invalid_value");
    if (parallel_off_ && !r_.tools.is_null())
      return unsupported("parallel_tool_calls", "the K3 chat template cannot ask for at most one call; leave it true");
    if (top_logprobs_) {
      if (!r_.logprobs) return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
      r_.top_logprobs = *top_logprobs_;
    }
    // OpenAI refuses stream_options without stream; so do we, whatever its value.
    if (root.contains("stream_options") && !root["stream_options"].is_null() && !r_.stream)
      return bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options", "invalid_value");
    if (chat_ && !root.contains("messages"))
      return bad_request("'messages' is required", "messages", "missing_required_parameter");
    if (!chat_ && !root.contains("prompt"))
      return bad_request("'prompt' is required", "prompt", "missing_required_parameter");
    return std::nullopt;
  }

  GenRequest& request() { return r_; }

 private:
  // A field neither endpoint knows.
  static ApiError unknown(const std::string& k) {
    return bad_request(fmt::format("unrecognized request argument supplied: {}", k), k, "unknown_parameter");
  }

  // Fields of both endpoints; handled_ says whether `k` was one of them.
  MaybeError read_shared_field(const std::string& k, const ojson& v) {
    handled_ = true;
    if (k == "model") {
      if (!v.is_null() && !v.is_string()) return wrong_type(k, "a string", v);
      if (v.is_string() && v.get<std::string>() != limits_.model_name) {
        ApiError nf;
        nf.status = 404;
        nf.message = fmt::format("the model '{}' does not exist; this server serves '{}'", v.get<std::string>(),
                                 limits_.model_name);
        nf.param = "model";
        nf.code = "model_not_found";
        return nf;
      }
    } else if (k == "max_tokens" || (chat_ && k == "max_completion_tokens")) {
      if (v.is_null()) return std::nullopt;
      if (seen_max_)
        return bad_request("give either 'max_tokens' or 'max_completion_tokens', not both", k, "invalid_value");
      seen_max_ = true;
      return read_max_tokens(v, k, limits_.max_tokens, r_.max_tokens);
    } else if (k == "stream") {
      if (!v.is_null() && !v.is_boolean()) return wrong_type(k, "a boolean", v);
      r_.stream = v.is_boolean() && v.get<bool>();
    } else if (k == "stream_options") {
      return read_stream_options(v);
    } else if (k == "n") {
      if (!v.is_null() && !v.is_number_integer()) return wrong_type(k, "an integer or null", v);
      if (v.is_number_integer() && (v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxChoices))
        return bad_request(fmt::format("'n' must be between 1 and {}", kMaxChoices), k, "invalid_value");
      if (v.is_number_integer()) r_.n = int(v.get<int64_t>());
    } else if (k == "temperature") {
      return read_number(v, k, 0, 2, r_.sampling.temperature);
    } else if (k == "top_p") {
      return read_number(v, k, 0, 1, r_.sampling.top_p);
    } else if (k == "min_p") {
      return read_number(v, k, 0, 1, r_.sampling.min_p);
    } else if (k == "top_k") {
      if (!v.is_null() && !v.is_number_integer()) return wrong_type(k, "an integer or null", v);
      if (v.is_number_integer() && (v.get<int64_t>() < -1 || v.get<int64_t>() > INT32_MAX))
        return bad_request("'top_k' must be -1 or 0 (all tokens) or a positive count", k, "invalid_value");
      if (v.is_number_integer()) r_.sampling.top_k = int(std::max<int64_t>(v.get<int64_t>(), 0));
    } else if (k == "frequency_penalty") {
      return read_number(v, k, -2, 2, r_.sampling.frequency_penalty);
    } else if (k == "presence_penalty") {
      return read_number(v, k, -2, 2, r_.sampling.presence_penalty);
    } else if (k == "user") {
      if (!v.is_null() && !v.is_string()) return wrong_type(k, "a string", v);
    } else if (k == "metadata") {
      if (!v.is_null() && !v.is_object()) return wrong_type(k, "an object", v);
      if (v.is_object())
        for (auto o = v.begin(); o != v.end(); ++o)
          if (!o.value().is_string()) return wrong_type("metadata." + o.key(), "a string", o.value());
    } else if (k == "logit_bias") {
      if (!v.is_null() && !(v.is_object() && v.empty())) return unsupported(k, "only null or {} is supported");
    } else if (k == "seed") {
      if (!v.is_null() && !v.is_number_integer()) return wrong_type(k, "an integer or null", v);
      if (v.is_number_integer()) {
        r_.sampling.seed = v.is_number_unsigned() ? v.get<uint64_t>() : uint64_t(v.get<int64_t>());
        r_.seeded = true;
      }
    } else if (k == "stop") {
      return read_stop(v, r_.stop);
    } else {
      handled_ = false;
    }
    return std::nullopt;
  }

  MaybeError read_stream_options(const ojson& v) {
    if (v.is_null()) return std::nullopt;
    if (!v.is_object()) return wrong_type("stream_options", "an object or null", v);
    for (auto o = v.begin(); o != v.end(); ++o) {
      if (o.key() != "include_usage")
        return bad_request(fmt::format("'stream_options.{}' is not supported", o.key()), "stream_options." + o.key(),
                           "unknown_parameter");
      if (!o.value().is_boolean()) return wrong_type("stream_options.include_usage", "a boolean", o.value());
      r_.include_usage = o.value().get<bool>();
    }
    return std::nullopt;
  }

  // /v1/completions' own fields.
  MaybeError read_completion_field(const std::string& k, ojson& v) {
    if (k == "best_of") {
      if (!v.is_null() && !(v.is_number_integer() && v.get<int64_t>() == 1)) return unsupported(k, "only 1 is supported");
    } else if (k == "prompt") {
      if (!v.is_string()) return wrong_type(k, "a string", v);
      if (v.get_ref<const std::string&>().empty()) return bad_request("'prompt' must not be empty", k, "invalid_value");
      r_.prompt = std::move(v.get_ref<std::string&>());  // no copy of a large prompt
    } else if (k == "echo") {
      if (!v.is_null() && v != false) return unsupported(k, "only false is supported");
    } else if (k == "logprobs") {  // the legacy form: the number of alternatives, 0..5
      if (!v.is_null() && !v.is_number_integer()) return wrong_type(k, "an integer or null", v);
      if (v.is_number_integer() && (v.get<int64_t>() < 0 || v.get<int64_t>() > 5))
        return bad_request("'logprobs' must be between 0 and 5", k, "invalid_value");
      if (v.is_number_integer()) r_.logprobs = true, r_.top_logprobs = int(v.get<int64_t>());
    } else if (k == "suffix") {
      if (!v.is_null() && v != "") return unsupported(k, "suffixes are not supported");
    } else {
      return unknown(k);
    }
    return std::nullopt;
  }

  // /v1/chat/completions' own fields.
  MaybeError read_chat_field(const std::string& k, ojson& v) {
    if (k == "messages") {
      if (auto e = check_messages(v)) return e;
      r_.messages = std::move(v);
    } else if (k == "logprobs") {
      if (!v.is_null() && !v.is_boolean()) return wrong_type(k, "a boolean or null", v);
      if (v.is_boolean()) r_.logprobs = v.get<bool>();
    } else if (k == "top_logprobs") {
      if (!v.is_null() && !v.is_number_integer()) return wrong_type(k, "an integer or null", v);
      if (v.is_number_integer() && (v.get<int64_t>() < 0 || v.get<int64_t>() > 20))
        return bad_request("'top_logprobs' must be between 0 and 20", k, "invalid_value");
      if (v.is_number_integer()) top_logprobs_ = int(v.get<int64_t>());
    } else if (k == "response_format") {
      if (!v.is_null() && v != ojson{{"type", "text"}}) return unsupported(k, "only {\"type\": \"text\"} is supported");
    } else if (k == "tools") {
      if (auto e = check_tools(v)) return e;
      if (v.is_array() && !v.empty()) r_.tools = v;
    } else if (k == "tool_choice") {
      return read_tool_choice(v);
    } else if (k == "parallel_tool_calls") {
      if (!v.is_null() && !v.is_boolean()) return wrong_type(k, "a boolean", v);
      if (v == false) parallel_off_ = true;
    } else if (k == "modalities") {
      if (!v.is_null() && v != ojson::array({"text"})) return unsupported(k, "only [\"text\"] is supported");
    } else if (k == "audio" || k == "prediction") {
      if (!v.is_null()) return unsupported(k, "only null is supported");
    } else if (k == "service_tier") {
      if (!v.is_null() && v != "auto" && v != "default") return unsupported(k, "only null, \"auto\" or \"default\"");
    } else if (k == "store") {
      if (!v.is_null() && v != false) return unsupported(k, "only false is supported");
    } else if (k == "reasoning_effort") {
      return read_reasoning_effort(v);
    } else if (k == "chat_template_kwargs") {
      tokenizer::ChatOptions o;
      if (Status s = tokenizer::apply_chat_template_kwargs(v, o); !s.ok())
        return bad_request(s.message(), k, v.is_object() ? "invalid_value" : "invalid_type");
      r_.thinking = o.thinking;
      if (v.is_object() && v.contains("thinking_effort")) kwargs_effort_ = o.thinking_effort;
    } else {
      return unknown(k);
    }
    return std::nullopt;
  }

  MaybeError read_tool_choice(const ojson& v) {
    const std::string k = "tool_choice";
    if (!v.is_null() && v != "auto" && v != "none" && v != "required") {
      if (v.is_object())
        return unsupported(k, "the K3 chat template cannot name one tool; use \"required\", \"auto\" or \"none\"");
      return bad_request("'tool_choice' must be \"auto\", \"none\" or \"required\"", k, "invalid_value");
    }
    if (v.is_string()) r_.tool_choice = v.get<std::string>();
    return std::nullopt;
  }

  MaybeError read_reasoning_effort(const ojson& v) {
    const std::string k = "reasoning_effort";
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) return wrong_type(k, "a string", v);
    const std::string eff = trim_lower(v.get<std::string>());
    if (eff != "low" && eff != "high" && eff != "max")
      return bad_request("'reasoning_effort' must be \"low\", \"high\" or \"max\"", k, "invalid_value");
    r_.thinking_effort = eff;
    return std::nullopt;
  }

  const bool chat_;
  const ValidationLimits& limits_;
  GenRequest r_;
  bool handled_ = false;            // the last field was one of read_shared_field's
  bool seen_max_ = false;           // max_tokens or max_completion_tokens given
  std::optional<int> top_logprobs_;  // chat: only with logprobs true
  bool parallel_off_ = false;       // parallel_tool_calls: false
  std::optional<std::optional<std::string>> kwargs_effort_;  // chat_template_kwargs.thinking_effort, when given
};

// Sampling without a seed gets a fresh one and no memo (the answer is meant
// to vary); nor do answers with log probabilities (the memo keeps text) or
// several choices. The rest get the memo's key.
void finish_request(GenRequest& r) {
  if (!r.sampling.greedy() && !r.seeded) {
    std::random_device rd;
    r.sampling.seed = (uint64_t(rd()) << 32) | rd();
    return;
  }
  if (r.logprobs || r.n > 1) return;
  const bool chat = r.kind == RequestKind::Chat;
  ojson key;
  key["kind"] = chat ? "chat" : "completion";
  key["max_tokens"] = r.max_tokens;
  key["stop"] = r.stop;
  const SamplingParams& sp = r.sampling;
  key["sampling"] = {sp.temperature, sp.top_p, sp.top_k, sp.min_p, sp.presence_penalty, sp.frequency_penalty,
                     sp.greedy() ? 0 : sp.seed};
  if (chat) {
    key["tools"] = r.tools;
    key["tool_choice"] = r.tool_choice;
    key["thinking"] = r.thinking;
    key["thinking_effort"] = r.thinking_effort ? ojson(*r.thinking_effort) : ojson();
  }
  // The prompt (or messages) is hashed, not copied, into the key.
  r.memo_key = memo_digest(dump_json(key), chat ? dump_json(r.messages) : r.prompt);
}

}  // namespace

Validated validate_request(RequestKind kind, std::string_view body, const ValidationLimits& limits) {
  if (auto e = check_body_shape(kind == RequestKind::Chat, body, limits)) return *e;
  ojson root = parse_body(body);
  if (root.is_discarded()) return bad_request("the request body is not valid JSON", std::nullopt, "invalid_json");
  if (!root.is_object()) return bad_request("the request body must be a JSON object", std::nullopt, "invalid_json");
  RequestReader reader(kind, limits);
  for (auto it = root.begin(); it != root.end(); ++it)
    if (auto e = reader.read_field(it.key(), it.value())) return *e;
  if (auto e = reader.check_combinations(root)) return *e;
  GenRequest& r = reader.request();
  finish_request(r);
  return std::move(r);
}

}  // namespace deltafin::server
