#include "server/anthropic.h"

#include <fmt/format.h>

#include "server/json_body.h"

namespace deltafin::server {

namespace {

using ojson = nlohmann::ordered_json;

ApiError bad(std::string message, std::string param) { return bad_request(std::move(message), std::move(param)); }

std::string error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status < 500 ? "invalid_request_error" : "api_error";
  }
}

std::string event(const char* name, const ojson& data) {
  return fmt::format("event: {}\ndata: {}\n\n", name, dump_json(data));
}

// Text of a tool_result's content: a string, or text blocks joined.
std::variant<std::string, ApiError> result_text(const ojson& c, const std::string& p) {
  if (c.is_null()) return std::string();
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return bad(fmt::format("'{}' must be a string or an array of text blocks", p), p);
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].is_object() || c[i].value("type", "") != "text" || !c[i].contains("text") || !c[i]["text"].is_string())
      return bad(fmt::format("'{}[{}]' must be a text block", p, i), fmt::format("{}[{}]", p, i));
    out += c[i]["text"].get<std::string>();
  }
  return out;
}

// One Anthropic message into chat messages (tool results become tool messages).
std::optional<ApiError> add_message(const ojson& m, size_t i, ojson& out) {
  const std::string p = fmt::format("messages[{}]", i);
  if (!m.is_object()) return bad(fmt::format("'{}' must be an object", p), p);
  for (auto it = m.begin(); it != m.end(); ++it)
    if (it.key() != "role" && it.key() != "content")
      return bad(fmt::format("'{}.{}' is not supported", p, it.key()), p + "." + it.key());
  const std::string role = m.value("role", "");
  if (role != "user" && role != "assistant")
    return bad(fmt::format("'{}.role' must be \"user\" or \"assistant\"", p), p + ".role");
  if (!m.contains("content")) return bad(fmt::format("'{}.content' is required", p), p + ".content");
  const ojson& c = m["content"];
  if (c.is_string()) {
    out.push_back({{"role", role}, {"content", c}});
    return std::nullopt;
  }
  if (!c.is_array()) return bad(fmt::format("'{}.content' must be a string or an array of blocks", p), p + ".content");
  std::string text, thinking;
  ojson calls = ojson::array();
  for (size_t k = 0; k < c.size(); ++k) {
    const std::string bp = fmt::format("{}.content[{}]", p, k);
    const ojson& b = c[k];
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      return bad(fmt::format("'{}' must be a block with a type", bp), bp);
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) return bad(fmt::format("'{}.text' must be a string", bp), bp);
      text += b["text"].get<std::string>();
    } else if (type == "thinking" && role == "assistant") {
      if (b.contains("thinking") && b["thinking"].is_string()) thinking += b["thinking"].get<std::string>();
    } else if (type == "tool_use" && role == "assistant") {
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
        return bad(fmt::format("'{}' needs a string id and name", bp), bp);
      const ojson input = b.contains("input") ? b["input"] : ojson::object();
      if (!input.is_object()) return bad(fmt::format("'{}.input' must be an object", bp), bp + ".input");
      calls.push_back({{"id", b["id"]},
                       {"type", "function"},
                       {"function", {{"name", b["name"]}, {"arguments", dump_json(input)}}}});
    } else if (type == "tool_result" && role == "user") {
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
        return bad(fmt::format("'{}.tool_use_id' must be a string", bp), bp + ".tool_use_id");
      auto r = result_text(b.contains("content") ? b["content"] : ojson(), bp + ".content");
      if (auto* e = std::get_if<ApiError>(&r)) return *e;
      std::string body = std::get<std::string>(r);
      if (b.value("is_error", false)) body = "Error: " + body;
      out.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", body}});
    } else {
      return bad(fmt::format("'{}': {} blocks are not supported in {} messages", bp, type, role), bp + ".type");
    }
  }
  if (role == "user" && text.empty() && !c.empty() && out.size() > 0 && out.back().value("role", "") == "tool")
    return std::nullopt;  // only tool results
  ojson msg = {{"role", role}, {"content", text}};
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  out.push_back(std::move(msg));
  return std::nullopt;
}

}  // namespace

std::string anthropic_error_body(const ApiError& e) {
  return dump_json({{"type", "error"}, {"error", {{"type", error_type(e.status)}, {"message", e.message}}}});
}

std::variant<ojson, ApiError> anthropic_to_chat(std::string_view body) {
  const ojson root = parse_body(body);
  if (root.is_discarded()) return bad_request("the request body is not valid JSON", std::nullopt, "invalid_json");
  if (!root.is_object()) return bad_request("the request body must be a JSON object", std::nullopt, "invalid_json");
  ojson chat = ojson::object();
  ojson messages = ojson::array();
  if (!root.contains("max_tokens")) return bad("'max_tokens' is required", "max_tokens");
  if (!root.contains("messages") || !root["messages"].is_array())
    return bad("'messages' is required and must be an array", "messages");
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& k = it.key();
    const ojson& v = it.value();
    if (k == "model" || k == "max_tokens" || k == "temperature" || k == "top_p" || k == "top_k" || k == "stream") {
      chat[k] = v;
    } else if (k == "stop_sequences") {
      chat["stop"] = v;
    } else if (k == "system") {
      if (v.is_string()) {
        if (!v.get<std::string>().empty()) messages.push_back({{"role", "system"}, {"content", v}});
      } else {
        auto t = result_text(v, "system");
        if (auto* e = std::get_if<ApiError>(&t)) return *e;
        messages.push_back({{"role", "system"}, {"content", std::get<std::string>(t)}});
      }
    } else if (k == "messages") {
      // added below, after the system message
    } else if (k == "tools") {
      if (!v.is_array()) return bad("'tools' must be an array", "tools");
      ojson tools = ojson::array();
      for (size_t i = 0; i < v.size(); ++i) {
        const ojson& t = v[i];
        const std::string p = fmt::format("tools[{}]", i);
        if (!t.is_object() || !t.contains("name")) return bad(fmt::format("'{}' must be an object with a name", p), p);
        if (t.contains("type") && t["type"] != "custom")
          return bad(fmt::format("'{}.type': only custom (client) tools are supported", p), p + ".type");
        ojson fn = {{"name", t["name"]}};
        if (t.contains("description")) fn["description"] = t["description"];
        if (t.contains("input_schema")) fn["parameters"] = t["input_schema"];
        for (auto f = t.begin(); f != t.end(); ++f)
          if (f.key() != "name" && f.key() != "description" && f.key() != "input_schema" && f.key() != "type" &&
              f.key() != "cache_control")
            return bad(fmt::format("'{}.{}' is not supported", p, f.key()), p + "." + f.key());
        tools.push_back({{"type", "function"}, {"function", fn}});
      }
      chat["tools"] = std::move(tools);
    } else if (k == "tool_choice") {
      const std::string type = v.is_object() ? v.value("type", "") : "";
      if (v.is_object() && v.value("disable_parallel_tool_use", false))
        return bad("'tool_choice.disable_parallel_tool_use' cannot be honoured by the K3 template",
                   "tool_choice.disable_parallel_tool_use");
      if (type == "auto") chat["tool_choice"] = "auto";
      else if (type == "any") chat["tool_choice"] = "required";
      else if (type == "none") chat["tool_choice"] = "none";
      else if (type == "tool")
        return bad("'tool_choice': the K3 chat template cannot name one tool; use any, auto or none", "tool_choice");
      else return bad("'tool_choice.type' must be auto, any, tool or none", "tool_choice");
    } else if (k == "thinking") {
      const std::string type = v.is_object() ? v.value("type", "") : "";
      if (type != "enabled" && type != "disabled")
        return bad("'thinking.type' must be \"enabled\" or \"disabled\"", "thinking");
      chat["chat_template_kwargs"] = {{"thinking", type == "enabled"}};
    } else if (k == "metadata") {
      if (!v.is_null() && !v.is_object()) return bad("'metadata' must be an object", "metadata");
    } else {
      return bad(fmt::format("'{}' is not supported", k), k);
    }
  }
  // No thinking unless asked for, as Anthropic's API defines it.
  if (!chat.contains("chat_template_kwargs")) chat["chat_template_kwargs"] = {{"thinking", false}};
  const ojson& in = root["messages"];
  for (size_t i = 0; i < in.size(); ++i)
    if (auto e = add_message(in[i], i, messages)) return *e;
  chat["messages"] = std::move(messages);
  return chat;
}

std::string anthropic_stop_reason(const AnthropicOutcome& o) {
  if (o.finish_reason == "length") return "max_tokens";
  if (o.finish_reason == "tool_calls") return "tool_use";
  return o.stop_sequence.empty() ? "end_turn" : "stop_sequence";
}

namespace {

ojson tool_use_block(const ToolCall& c, bool empty_input) {
  ojson input = empty_input ? ojson::object() : ojson::parse(c.arguments, nullptr, false);
  if (input.is_discarded()) input = ojson::object();
  return {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", input}};
}

ojson usage_json(int64_t in, int64_t out) { return {{"input_tokens", in}, {"output_tokens", out}}; }

}  // namespace

ojson anthropic_message(const AnthropicOutcome& o, const std::vector<Delta>& deltas) {
  std::string thinking, text;
  ojson tools = ojson::array();
  for (const Delta& d : deltas) {
    if (d.channel == Channel::Reasoning) thinking += d.text;
    else if (d.channel == Channel::Tool) tools.push_back(tool_use_block(d.call, false));
    else text += d.text;
  }
  ojson content = ojson::array();
  if (!thinking.empty()) content.push_back({{"type", "thinking"}, {"thinking", thinking}, {"signature", ""}});
  if (!text.empty() || tools.empty()) content.push_back({{"type", "text"}, {"text", text}});
  for (auto& t : tools) content.push_back(std::move(t));
  return {{"id", o.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", o.model},
          {"content", content},
          {"stop_reason", anthropic_stop_reason(o)},
          {"stop_sequence", o.stop_sequence.empty() ? ojson() : ojson(o.stop_sequence)},
          {"usage", usage_json(o.input_tokens, o.output_tokens)}};
}

std::string AnthropicStream::start(const std::string& id, const std::string& model, int64_t input_tokens) {
  ojson msg = {{"id", id},          {"type", "message"},     {"role", "assistant"},
               {"model", model},    {"content", ojson::array()}, {"stop_reason", nullptr},
               {"stop_sequence", nullptr}, {"usage", usage_json(input_tokens, 0)}};
  return event("message_start", {{"type", "message_start"}, {"message", msg}});
}

std::string AnthropicStream::close_block() {
  if (open_ == Open::None) return "";
  std::string out;
  if (open_ == Open::Thinking)
    out += event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", index_},
                                         {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
  open_ = Open::None;
  return out + event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicStream::push(const Delta& d) {
  std::string out;
  if (d.channel == Channel::Tool) {
    out += close_block();
    ++index_;
    out += event("content_block_start",
                 {{"type", "content_block_start"}, {"index", index_}, {"content_block", tool_use_block(d.call, true)}});
    out += event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", index_},
                                         {"delta", {{"type", "input_json_delta"}, {"partial_json", d.call.arguments}}}});
    return out + event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }
  const bool thinking = d.channel == Channel::Reasoning;
  const Open want = thinking ? Open::Thinking : Open::Text;
  if (open_ != want) {
    out += close_block();
    ++index_;
    open_ = want;
    const ojson block = thinking ? ojson{{"type", "thinking"}, {"thinking", ""}} : ojson{{"type", "text"}, {"text", ""}};
    out += event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
  }
  const ojson delta = thinking ? ojson{{"type", "thinking_delta"}, {"thinking", d.text}}
                               : ojson{{"type", "text_delta"}, {"text", d.text}};
  return out + event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
}

std::string AnthropicStream::finish(const AnthropicOutcome& o) {
  std::string out = close_block();
  if (index_ < 0) {  // nothing was written: one empty text block, as a message always has content
    out += event("content_block_start",
                 {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
    out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  }
  out += event("message_delta",
               {{"type", "message_delta"},
                {"delta", {{"stop_reason", anthropic_stop_reason(o)},
                           {"stop_sequence", o.stop_sequence.empty() ? ojson() : ojson(o.stop_sequence)}}},
                {"usage", {{"output_tokens", o.output_tokens}}}});
  return out + event("message_stop", {{"type", "message_stop"}});
}

std::string AnthropicStream::error(const ApiError& e) {
  return "event: error\ndata: " + anthropic_error_body(e) + "\n\n";
}

}  // namespace deltafin::server
