#include "tokenizer/chat.h"

#include <algorithm>
#include <thread>

#include "core/thread_pool.h"
#include "tokenizer/chat_template_text.h"
#include "tokenizer/template_values.h"

namespace deltafin::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;
using Attrs = std::vector<std::pair<std::string, std::string>>;

const ojson kNull;

// Python's dict.get(key): the value, or null when absent.
const ojson& get(const ojson& m, const char* key) {
  const auto it = m.find(key);
  return it == m.end() ? kNull : *it;
}

std::string escape_attr(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string_view xtml_type(const ojson& v) {
  if (v.is_boolean()) return k3::kTypeBoolean;
  if (v.is_null()) return k3::kTypeNull;
  if (v.is_number()) return k3::kTypeNumber;
  if (v.is_string()) return k3::kTypeString;
  if (v.is_object()) return k3::kTypeObject;
  return k3::kTypeArray;
}

// Segment builder: the template's open_tag / close_tag / internal message
// macros, split into control and ordinary segments as docs/design/tokenizer.md says.
class Renderer {
 public:
  std::vector<ChatSegment> segments;

  void control(std::string_view s) { add(true, s); }
  void text(std::string_view s) { add(false, s); }
  void open(std::string_view tag, const Attrs& attrs = {}) {
    control(k3::kOpen);
    text(tag);
    for (const auto& [k, v] : attrs) {
      text(" " + k);
      text("=\"");
      text(escape_attr(v));
      text("\"");
    }
    control(k3::kSep);
  }
  void close(std::string_view tag) {
    control(k3::kClose);
    text(tag);
    control(k3::kSep);
  }
  void eom() { control(k3::kEndOfMsg); }
  void internal_message(std::string_view type, std::string_view body) {
    open("message", {{"role", "system"}, {"type", std::string(type)}});
    text(py_strip(body));
    close("message");
    eom();
  }
  void tool_declare(const ojson& tools, bool dynamic) {
    open("message", {{"role", "system"}, {"type", "tool-declare"}});
    std::string body(dynamic ? k3::kToolDeclareDynamicHead : k3::kToolDeclareHead);
    body += py_json_sorted(tools);
    body += k3::kToolDeclareTail;
    text(body);
    close("message");
    eom();
  }

 private:
  void add(bool control, std::string_view s) {
    if (!s.empty()) segments.push_back({control, std::string(s)});
  }
};

// What the template tracks across messages: the last assistant's tool calls
// and the tool-result counter (reset only by an assistant message).
struct State {
  const ojson* tool_calls = nullptr;  // an array, or none
  int64_t tool_index = 0;
};

// A message's content: a string, null/absent, or an array of text parts.
Result<std::string> content_text(const ojson& m, size_t index) {
  const ojson& c = get(m, "content");
  if (c.is_null()) return std::string();
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return error("chat: messages[{}].content must be a string, null or an array", index);
  std::string out;
  for (size_t j = 0; j < c.size(); ++j) {
    const ojson& part = c[j];
    if (!part.is_object()) return error("chat: messages[{}].content[{}] is not an object", index, j);
    const ojson& type = get(part, "type");
    if (type == "image" || type == "image_url")
      return error("chat: messages[{}].content[{}]: image content is not supported", index, j);
    const ojson& text = get(part, "text");
    if (!text.is_string()) return error("chat: messages[{}].content[{}].text must be a string", index, j);
    out += text.get<std::string>();
  }
  return out;
}

Status add_name(Attrs& attrs, const ojson& m, size_t index) {
  const ojson& name = get(m, "name");
  if (!py_truthy(name)) return {};
  auto s = py_str(name);
  if (!s.ok()) return error("chat: messages[{}].name: {}", index, s.message());
  attrs.push_back({"name", *s});
  return {};
}

// A tool call's function: `function` when it is an object, else the call itself.
const ojson& function_of(const ojson& call) {
  const ojson& fn = get(call, "function");
  return fn.is_object() ? fn : call;
}

// Python's str() of an id, for comparing call ids with result ids.
Result<std::string> id_text(const ojson& id, size_t index) {
  auto s = py_str(id);
  if (!s.ok()) return error("chat: messages[{}]: a tool call id: {}", index, s.message());
  return s;
}

// A result's call id: `tool_call_id` if present (even null), else `id`.
const ojson& result_call_id(const ojson& m) { return m.contains("tool_call_id") ? m["tool_call_id"] : get(m, "id"); }

Status render_call(Renderer& r, const ojson& call, size_t index, size_t k) {
  if (!call.is_object()) return error("chat: messages[{}].tool_calls[{}] is not an object", index, k);
  const ojson& fn = function_of(call);
  const ojson& name = get(fn, "name");
  if (name.is_null()) return error("chat: messages[{}].tool_calls[{}] has no function name", index, k);
  auto name_text = py_str(name);
  if (!name_text.ok()) return error("chat: messages[{}].tool_calls[{}].function.name: {}", index, k, name_text.message());
  r.open("call", {{"tool", *name_text}, {"index", std::to_string(k + 1)}});
  // OpenAI clients send `arguments` as a JSON string: one that parses as an
  // object is rendered as that object (engines do this before templating);
  // other text stays a string, which the template writes as a raw JSON block.
  ojson arguments = fn.contains("arguments") ? fn["arguments"] : ojson::object();
  if (arguments.is_string()) {
    ojson parsed = ojson::parse(arguments.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) arguments = std::move(parsed);
    else if (!parsed.is_discarded())
      return error("chat: messages[{}].tool_calls[{}].function.arguments is JSON but not an object", index, k);
  }
  const ojson& json_block = get(fn, "_xtml_json_block");
  if (!json_block.is_null()) {
    auto raw = py_str(json_block);
    if (!raw.ok()) return error("chat: messages[{}].tool_calls[{}]._xtml_json_block: {}", index, k, raw.message());
    r.open("json", {{"type", "object"}});
    r.text(*raw);
    r.close("json");
  } else if (arguments.is_object()) {
    for (const auto& [key, value] : arguments.items()) {
      r.open("argument", {{"key", key}, {"type", std::string(xtml_type(value))}});
      r.text(value.is_string() ? value.get<std::string>() : py_json_dumps(value));
      r.close("argument");
    }
  } else if (arguments.is_string()) {
    if (!py_strip(arguments.get<std::string>()).empty()) {
      r.open("json", {{"type", "object"}});
      r.text(arguments.get<std::string>());
      r.close("json");
    }
  } else if (!arguments.is_null()) {
    return error("chat: messages[{}].tool_calls[{}].function.arguments must be an object or a JSON object string",
                 index, k);
  }
  r.close("call");
  return {};
}

Status render_assistant(Renderer& r, const ojson& m, size_t index, const ChatOptions& opt) {
  if (opt.thinking) {
    const ojson* reasoning = &get(m, "reasoning_content");
    if (!py_truthy(*reasoning)) reasoning = &get(m, "reasoning");
    r.open("think");
    if (!reasoning->is_null()) {
      auto text = py_str(*reasoning);
      if (!text.ok()) return error("chat: messages[{}].reasoning_content: {}", index, text.message());
      if (!py_strip(*text).empty()) r.text(*text);
    }
    r.close("think");
  }
  DF_ASSIGN(std::string content, content_text(m, index));
  r.open("response");
  r.text(content);
  r.close("response");
  const ojson& calls = get(m, "tool_calls");
  if (py_truthy(calls)) {
    r.open("tools");
    for (size_t k = 0; k < calls.size(); ++k) DF_TRY(render_call(r, calls[k], index, k));
    r.close("tools");
  }
  return {};
}

// One tool result; `resolved_name` (may be null) comes from the matching call.
Status render_tool_message(Renderer& r, State& st, const ojson& m, size_t index, const ojson& resolved_name) {
  ++st.tool_index;
  ojson name;
  if (!resolved_name.is_null()) name = resolved_name;
  else if (m.contains("tool")) name = m["tool"];
  else name = get(m, "name");
  if (name.is_null() && st.tool_calls && st.tool_index <= int64_t(st.tool_calls->size())) {
    const ojson& fn = function_of((*st.tool_calls)[size_t(st.tool_index - 1)]);
    name = fn.contains("name") ? fn["name"] : ojson("");  // a missing name renders as ""
  }
  if (name.is_null())
    return error("chat: messages[{}]: a tool message needs a tool name: give `tool` or `name`, or answer a "
                 "preceding assistant tool call (by tool_call_id or by order)",
                 index);
  auto name_text = py_str(name);
  if (!name_text.ok()) return error("chat: messages[{}]: the tool name: {}", index, name_text.message());
  r.open("message", {{"role", "tool"}, {"tool", *name_text}, {"index", std::to_string(st.tool_index)}});
  DF_ASSIGN(std::string content, content_text(m, index));
  r.text(content);
  r.close("message");
  r.eom();
  return {};
}

bool is_tool_message(const ojson& m) { return m.is_object() && get(m, "role") == "tool"; }

// A run of consecutive tool results starting at messages[start]. If every
// result answers a call of the last assistant message (by id), they are
// rendered in the calls' order and named after the calls; otherwise in the
// order given.
Status render_tool_run(Renderer& r, State& st, const ojson& messages, size_t start) {
  std::vector<size_t> run;
  for (size_t k = start; k < messages.size() && is_tool_message(messages[k]); ++k) run.push_back(k);
  size_t resolved = 0;
  for (size_t k : run) {
    const ojson& call_id = result_call_id(messages[k]);
    if (call_id.is_null() || !st.tool_calls) continue;
    DF_ASSIGN(std::string want, id_text(call_id, k));
    bool found = false;
    for (const ojson& call : *st.tool_calls) {
      if (!call.is_object() || get(call, "id").is_null()) continue;
      DF_ASSIGN(std::string id, id_text(call["id"], k));
      if (id == want) found = true;
    }
    resolved += found;
  }
  if (resolved != run.size()) {
    for (size_t k : run) DF_TRY(render_tool_message(r, st, messages[k], k, kNull));
    return {};
  }
  std::vector<std::string> emitted;
  for (const ojson& call : *st.tool_calls) {
    if (!call.is_object() || get(call, "id").is_null()) continue;
    DF_ASSIGN(std::string id, id_text(call["id"], start));
    if (std::find(emitted.begin(), emitted.end(), id) != emitted.end()) continue;
    emitted.push_back(id);
    const ojson& name = get(function_of(call), "name");
    for (size_t k : run) {
      const ojson& rid = result_call_id(messages[k]);
      if (rid.is_null()) continue;
      DF_ASSIGN(std::string rid_text, id_text(rid, k));
      if (rid_text == id) DF_TRY(render_tool_message(r, st, messages[k], k, name));
    }
  }
  return {};
}

Status render_message(Renderer& r, State& st, const ojson& messages, size_t i, const ChatOptions& opt) {
  const ojson& m = messages[i];
  if (!m.is_object()) return error("chat: messages[{}] is not an object", i);
  if (!m.contains("role")) return error("chat: messages[{}] has no role", i);
  const ojson& role = m["role"];
  if (role == "user" || (role == "system" && !py_truthy(get(m, "tools")))) {
    Attrs attrs{{"role", role.get<std::string>()}};
    DF_TRY(add_name(attrs, m, i));
    DF_ASSIGN(std::string content, content_text(m, i));
    r.open("message", attrs);
    r.text(content);
    r.close("message");
    r.eom();
  } else if (role == "system") {
    r.tool_declare(m["tools"], /*dynamic=*/true);  // the message's content is not rendered
  } else if (role == "assistant") {
    const ojson& calls = get(m, "tool_calls");
    if (!calls.is_null() && !calls.is_array() && py_truthy(calls))
      return error("chat: messages[{}].tool_calls must be an array", i);
    st.tool_calls = calls.is_array() ? &calls : nullptr;
    st.tool_index = 0;
    Attrs attrs{{"role", "assistant"}};
    DF_TRY(add_name(attrs, m, i));
    r.open("message", attrs);
    DF_TRY(render_assistant(r, m, i, opt));
    r.close("message");
    r.eom();
  } else if (role == "tool" && (i == 0 || !is_tool_message(messages[i - 1]))) {
    DF_TRY(render_tool_run(r, st, messages, i));
  }  // other roles are skipped, as are tool results already rendered with their run
  return {};
}

void render_response_format(Renderer& r, const ojson& rf) {
  if (rf.is_null()) return;
  ojson schema;  // none unless json_schema gives one
  if (rf.is_object() && !get(rf, "json_schema").is_null()) {
    const ojson& wrapper = rf["json_schema"];
    if (wrapper.is_object() && wrapper.contains("schema")) schema = wrapper["schema"];
    else if (wrapper.is_object() && wrapper.contains("json_schema")) schema = wrapper["json_schema"];
    else schema = wrapper;
  }
  const ojson& type = rf.is_object() ? get(rf, "type") : rf;
  if (type == "json_object") {
    r.internal_message("response-format", k3::kResponseFormatJsonObject);
  } else if (type == "json_schema") {
    std::string body(k3::kResponseFormatJsonSchemaHead);
    body += py_json_sorted(schema);
    body += k3::kResponseFormatJsonSchemaTail;
    r.internal_message("response-format", body);
  }
}

}  // namespace

Result<std::vector<ChatSegment>> render_chat(const ojson& messages, const ChatOptions& opt) {
  if (!messages.is_array()) return error("chat: messages must be a JSON array");
  const auto& efforts = k3::kEfforts;
  const bool known_effort =
      opt.thinking_effort && std::find(std::begin(efforts), std::end(efforts), *opt.thinking_effort) != std::end(efforts);
  if (opt.thinking && opt.thinking_effort && !known_effort)
    return error("chat: thinking_effort '{}' is not supported; supported values are low, high and max",
                 *opt.thinking_effort);
  Renderer r;
  if (py_truthy(opt.tools)) r.tool_declare(opt.tools, /*dynamic=*/false);
  if (opt.thinking && known_effort) {
    std::string body(k3::kThinkingEffortHead);
    body += *opt.thinking_effort;
    body += k3::kThinkingEffortTail;
    r.internal_message("thinking-effort", body);
  }
  State st;
  for (size_t i = 0; i < messages.size(); ++i) DF_TRY(render_message(r, st, messages, i, opt));
  if (opt.tool_choice == "required") r.internal_message("tool-choice", k3::kToolChoiceRequired);
  else if (opt.tool_choice == "none") r.internal_message("tool-choice", k3::kToolChoiceNone);
  render_response_format(r, opt.response_format);
  if (opt.add_generation_prompt) {
    r.open("message", {{"role", "assistant"}});
    r.open(opt.thinking ? "think" : "response");
  }
  return std::move(r.segments);
}

std::string chat_text(const std::vector<ChatSegment>& segments) {
  std::string out;
  for (const auto& s : segments) out += s.text;
  return out;
}

Result<std::vector<uint32_t>> encode_segments(const Tokenizer& tok, const std::vector<ChatSegment>& segs,
                                              bool parallel) {
  size_t total = 0;
  for (const auto& s : segs) total += s.text.size();
  std::vector<std::vector<uint32_t>> parts(segs.size());
  std::vector<Status> status(segs.size());
  const size_t big = tok.options().parallel_threshold;
  const auto encode_one = [&](size_t k, bool inner_parallel) {
    auto ids = inner_parallel ? tok.encode(segs[k].text, segs[k].control)
                              : tok.encode_sequential(segs[k].text, segs[k].control);
    if (ids.ok()) parts[k] = std::move(ids).value();
    else status[k] = ids.status().with_context(fmt::format("chat segment {}", k));
  };
  const int threads = tok.options().threads > 0 ? tok.options().threads
                                                 : static_cast<int>(std::thread::hardware_concurrency());
  if (parallel && threads > 1 && total > big && segs.size() > 1) {
    // Huge segments split internally; the rest are spread over threads.
    std::vector<size_t> small;
    for (size_t k = 0; k < segs.size(); ++k) {
      if (segs[k].text.size() > big) encode_one(k, true);
      else small.push_back(k);
    }
    ThreadPool pool(std::min<int>(threads, static_cast<int>(std::max<size_t>(1, small.size()))));
    pool.parallel_for(small.size(), 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) encode_one(small[i], false);
    });
  } else {
    for (size_t k = 0; k < segs.size(); ++k) encode_one(k, parallel);
  }
  std::vector<uint32_t> ids;
  for (size_t k = 0; k < segs.size(); ++k) {
    DF_TRY(status[k]);
    ids.insert(ids.end(), parts[k].begin(), parts[k].end());
  }
  return ids;
}

Result<std::vector<uint32_t>> encode_chat(const Tokenizer& tok, const ojson& messages, const ChatOptions& options) {
  DF_ASSIGN(auto segments, render_chat(messages, options));
  return encode_segments(tok, segments, true);
}

Result<std::vector<uint32_t>> chat_stop_ids(const Tokenizer& tok) {
  DF_ASSIGN(uint32_t eom, tok.special_id(k3::kEndOfMsg));
  return std::vector<uint32_t>{eom};
}

}  // namespace deltafin::tokenizer
