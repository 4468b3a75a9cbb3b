#include "tokenizer/chat.h"

#include <thread>

#include "core/thread_pool.h"
#include "tokenizer/chat_prose.h"
#include "tokenizer/utf8.h"

namespace deltafin::tokenizer {

namespace {

using ojson = nlohmann::ordered_json;
using Attrs = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kOpen = "<|open|>";
constexpr const char* kClose = "<|close|>";
constexpr const char* kSep = "<|sep|>";
constexpr const char* kEndOfMsg = "<|end_of_msg|>";

std::string replace(std::string text, const std::string& key, const std::string& value) {
  const size_t p = text.find(key);
  if (p != std::string::npos) text.replace(p, key.size(), value);
  return text;
}

// Python str.strip(): drop leading/trailing isspace() characters.
std::string strip(const std::string& s) {
  if (first_invalid_utf8(s) != kUtf8Valid) return s;  // rejected later by encode
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t i = b;
    if (!is_python_space(next_code_point(s, i))) break;
    b = i;
  }
  while (e > b) {
    size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_python_space(next_code_point(s, i))) break;
    e = start;
  }
  return s.substr(b, e - b);
}

bool is_blank(const std::string& s) { return strip(s).empty(); }

std::string escape_attr(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// Deep-sorted compact JSON (`,` and `:`), non-ASCII kept as-is.
std::string sorted_compact(const ojson& j) {
  const nlohmann::json sorted = nlohmann::json::parse(j.dump());  // std::map keys: sorted
  return sorted.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Python json.dumps(value) with ", " and ": " separators, keys in order.
std::string python_json(const ojson& j) {
  if (j.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) out += ", ";
      first = false;
      out += ojson(k).dump(-1, ' ', prose::kArgumentJsonEnsureAscii) + ": " + python_json(v);
    }
    return out + "}";
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + python_json(j[i]);
    return out + "]";
  }
  if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
  return j.dump(-1, ' ', prose::kArgumentJsonEnsureAscii, nlohmann::json::error_handler_t::replace);
}

const char* json_type_name(const ojson& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

class Renderer {
 public:
  std::vector<ChatSegment> segments;

  void control(const std::string& s) { add(true, s); }
  void text(const std::string& s) { add(false, s); }
  void open(const std::string& tag, const Attrs& attrs = {}) {
    control(kOpen);
    text(tag);
    for (const auto& [k, v] : attrs) {
      text(" " + k);
      text("=\"");
      text(escape_attr(v));
      text("\"");
    }
    control(kSep);
  }
  void close(const std::string& tag) {
    control(kClose);
    text(tag);
    control(kSep);
  }
  void eom() { control(kEndOfMsg); }
  void sys_internal(const std::string& type, const std::string& body) {
    open("message", {{"role", "system"}, {"type", type}});
    text(strip(body));
    close("message");
    eom();
  }

 private:
  void add(bool control, const std::string& s) {
    if (!s.empty()) segments.push_back({control, s});
  }
};

// Message content: string, null, or an array of text parts.
Result<std::string> content_text(const ojson& m, size_t index) {
  if (!m.contains("content") || m["content"].is_null()) return std::string();
  const ojson& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return error("chat: messages[{}].content must be a string, null or an array", index);
  std::string out;
  for (const auto& part : c) {
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>()
                                 : "";
    if (type == "text" && part.contains("text") && part["text"].is_string()) out += part["text"].get<std::string>();
    else if (type == "image_url" || type == "image") return error("chat: messages[{}]: image content is not supported", index);
    else return error("chat: messages[{}].content has a part that is not {{\"type\":\"text\",\"text\":...}}", index);
  }
  return out;
}

std::string str_field(const ojson& m, const char* key) {
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : std::string();
}

Status render_assistant(Renderer& r, const ojson& m, size_t index, const ChatOptions& opt) {
  Attrs attrs{{"role", "assistant"}};
  if (!str_field(m, "name").empty()) attrs.push_back({"name", str_field(m, "name")});
  r.open("message", attrs);
  if (opt.thinking) {
    std::string reasoning = str_field(m, "reasoning_content");
    if (reasoning.empty()) reasoning = str_field(m, "reasoning");
    r.open("think");
    if (!is_blank(reasoning)) r.text(reasoning);
    r.close("think");
  }
  DF_ASSIGN(std::string content, content_text(m, index));
  r.open("response");
  r.text(content);
  r.close("response");
  if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
    r.open("tools");
    size_t call_index = 0;
    for (const auto& call : m["tool_calls"]) {
      ++call_index;
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
        return error("chat: messages[{}].tool_calls[{}] has no function object", index, call_index - 1);
      const ojson& fn = call["function"];
      r.open("call", {{"tool", str_field(fn, "name")}, {"index", std::to_string(call_index)}});
      ojson args;
      std::string raw;
      bool is_raw = false;
      if (fn.contains("arguments") && fn["arguments"].is_string()) {
        raw = fn["arguments"].get<std::string>();
        args = ojson::parse(raw, nullptr, false);
        is_raw = args.is_discarded();
      } else if (fn.contains("arguments")) {
        args = fn["arguments"];
      } else {
        args = ojson::object();
      }
      if (is_raw) {
        r.open("json", {{"type", "object"}});
        r.text(raw);
        r.close("json");
      } else {
        if (!args.is_object())
          return error("chat: messages[{}].tool_calls[{}].function.arguments is JSON but not an object", index,
                       call_index - 1);
        for (const auto& [k, v] : args.items()) {
          r.open("argument", {{"key", k}, {"type", json_type_name(v)}});
          r.text(v.is_string() ? v.get<std::string>() : python_json(v));
          r.close("argument");
        }
      }
      r.close("call");
    }
    r.close("tools");
  }
  r.close("message");
  r.eom();
  return Status();
}

// Tool results following an assistant message with tool calls: reorder them
// to the calls' order (only if every result matches a call id) and fill in
// tool names.
ojson normalise(const ojson& messages) {
  ojson out = ojson::array();
  size_t i = 0;
  const ojson* last_calls = nullptr;
  while (i < messages.size()) {
    const ojson& m = messages[i];
    const bool is_tool = m.is_object() && str_field(m, "role") == "tool";
    if (!is_tool) {
      if (m.is_object() && str_field(m, "role") == "assistant" && m.contains("tool_calls") &&
          m["tool_calls"].is_array())
        last_calls = &m["tool_calls"];
      out.push_back(m);
      ++i;
      continue;
    }
    std::vector<ojson> run;
    while (i < messages.size() && messages[i].is_object() && str_field(messages[i], "role") == "tool")
      run.push_back(messages[i++]);
    std::vector<std::string> call_ids, call_names;
    if (last_calls)
      for (const auto& c : *last_calls) {
        call_ids.push_back(c.is_object() ? str_field(c, "id") : "");
        call_names.push_back(c.is_object() && c.contains("function") && c["function"].is_object()
                                 ? str_field(c["function"], "name")
                                 : "");
      }
    const auto call_pos = [&](const ojson& t) -> int {
      const std::string id = str_field(t, "tool_call_id");
      for (size_t k = 0; k < call_ids.size() && !id.empty(); ++k)
        if (call_ids[k] == id) return static_cast<int>(k);
      return -1;
    };
    bool all_match = !run.empty();
    for (const auto& t : run) all_match = all_match && call_pos(t) >= 0;
    if (all_match)
      std::stable_sort(run.begin(), run.end(), [&](const ojson& a, const ojson& b) { return call_pos(a) < call_pos(b); });
    for (auto& t : run) {
      if (str_field(t, "tool").empty() && str_field(t, "name").empty()) {
        const int p = call_pos(t);
        if (p >= 0 && !call_names[p].empty()) t["tool"] = call_names[p];
      }
      out.push_back(t);
    }
  }
  return out;
}

}  // namespace

Result<std::vector<ChatSegment>> render_chat(const ojson& raw_messages, const ChatOptions& opt) {
  if (!raw_messages.is_array()) return error("chat: messages must be a JSON array");
  for (size_t i = 0; i < raw_messages.size(); ++i)
    if (!raw_messages[i].is_object()) return error("chat: messages[{}] is not an object", i);
  const ojson messages = normalise(raw_messages);
  Renderer r;
  if (!opt.tools.is_null()) {
    if (!opt.tools.is_array()) return error("chat: tools must be an array");
    if (!opt.tools.empty()) r.sys_internal("tool-declare", replace(prose::kToolDeclare, "{tools}", sorted_compact(opt.tools)));
  }
  if (opt.thinking && opt.reasoning_effort) {
    const std::string& e = *opt.reasoning_effort;
    if (e != "low" && e != "high" && e != "max")
      return error("chat: reasoning effort '{}' is not one of low, high, max", e);
    r.sys_internal("thinking-effort", replace(prose::kThinkingEffort, "{effort}", e));
  }
  size_t tool_run = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    const std::string role = str_field(m, "role");
    tool_run = role == "tool" ? tool_run + 1 : 0;
    if (role == "user" || role == "system") {
      if (role == "system" && m.contains("tools") && m["tools"].is_array()) {
        DF_ASSIGN(std::string content, content_text(m, i));
        if (!is_blank(content)) {
          r.open("message", {{"role", "system"}});
          r.text(content);
          r.close("message");
          r.eom();
        }
        r.sys_internal("tool-declare", replace(prose::kToolDeclareDynamic, "{tools}", sorted_compact(m["tools"])));
        continue;
      }
      Attrs attrs{{"role", role}};
      if (!str_field(m, "name").empty()) attrs.push_back({"name", str_field(m, "name")});
      DF_ASSIGN(std::string content, content_text(m, i));
      r.open("message", attrs);
      r.text(content);
      r.close("message");
      r.eom();
    } else if (role == "tool") {
      Attrs attrs{{"role", "tool"}};
      std::string name = str_field(m, "tool");
      if (name.empty()) name = str_field(m, "name");
      if (!name.empty()) attrs.push_back({"tool", name});
      attrs.push_back({"index", std::to_string(tool_run)});
      DF_ASSIGN(std::string content, content_text(m, i));
      r.open("message", attrs);
      r.text(content);
      r.close("message");
      r.eom();
    } else if (role == "assistant") {
      DF_TRY(render_assistant(r, m, i, opt));
    }  // unknown roles are skipped
  }
  if (opt.tool_choice.is_string()) {
    const std::string c = opt.tool_choice.get<std::string>();
    if (c == "required") r.sys_internal("tool-choice", prose::kToolChoiceRequired);
    if (c == "none") r.sys_internal("tool-choice", prose::kToolChoiceNone);
  }
  if (opt.response_format.is_object()) {
    const std::string type = str_field(opt.response_format, "type");
    if (type == "json_object") {
      r.sys_internal("response-format", prose::kResponseFormatJsonObject);
    } else if (type == "json_schema") {
      ojson schema = opt.response_format.contains("json_schema") ? opt.response_format["json_schema"] : ojson();
      if (schema.is_object() && schema.contains("schema")) schema = schema["schema"];
      r.sys_internal("response-format", replace(prose::kResponseFormatJsonSchema, "{schema}", sorted_compact(schema)));
    }
  }
  if (opt.add_generation_prompt) {
    r.open("message", {{"role", "assistant"}});
    r.open(opt.thinking ? "think" : "response");
  }
  return std::move(r.segments);
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
  DF_ASSIGN(uint32_t eom, tok.special_id(kEndOfMsg));
  return std::vector<uint32_t>{eom};
}

}  // namespace deltafin::tokenizer
