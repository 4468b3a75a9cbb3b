#include "server/tool_calls.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template_text.h"
#include "tokenizer/utf8.h"

namespace deltafin::server {

namespace {

namespace k3 = tokenizer::k3;

constexpr size_t kMaxMarker = 4096;  // a longer tag is not one the model was taught
constexpr int kMaxJsonDepth = 64;    // deeper values are refused before parsing (no deep recursion)

struct Tag {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  const std::string* attr(std::string_view key) const {
    for (const auto& [k, v] : attrs)
      if (k == key) return &v;
    return nullptr;
  }
};

// The template's attribute escaping, undone: &quot; and &amp;.
std::string unescape_attr(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    if (v.compare(i, 6, "&quot;") == 0) {
      out += '"';
      i += 6;
    } else if (v.compare(i, 5, "&amp;") == 0) {
      out += '&';
      i += 5;
    } else {
      out += v[i++];
    }
  }
  return out;
}

// `name key="value" key2="value2"`, spelled exactly as the template writes it.
std::optional<Tag> parse_tag(std::string_view s) {
  Tag tag;
  size_t i = s.find(' ');
  tag.name = std::string(s.substr(0, i));
  if (tag.name.empty() || tag.name.find_first_of("=\"") != std::string::npos) return std::nullopt;
  while (i != std::string_view::npos && i < s.size()) {
    if (s[i] != ' ') return std::nullopt;
    const size_t eq = s.find("=\"", i + 1);
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view key = s.substr(i + 1, eq - i - 1);
    if (key.empty() || key.find_first_of(" \"=") != std::string_view::npos) return std::nullopt;
    const size_t end = s.find('"', eq + 2);
    if (end == std::string_view::npos) return std::nullopt;
    if (tag.attr(key)) return std::nullopt;  // a repeated attribute
    tag.attrs.emplace_back(std::string(key), unescape_attr(s.substr(eq + 2, end - eq - 2)));
    i = end + 1;
  }
  return tag;
}

bool only_keys(const Tag& t, std::initializer_list<std::string_view> keys) {
  return std::all_of(t.attrs.begin(), t.attrs.end(), [&](const auto& a) {
    return std::find(keys.begin(), keys.end(), a.first) != keys.end();
  });
}

bool valid_utf8(std::string_view s) { return tokenizer::first_invalid_utf8(s) == tokenizer::kUtf8Valid; }

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; });
}

bool too_deep(std::string_view s) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// The value as JSON, or nothing when it is not valid (or too deep).
std::optional<nlohmann::json> parse_json(std::string_view s) {
  if (!valid_utf8(s) || too_deep(s)) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string json_string(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', /*ensure_ascii=*/false); }

}  // namespace

void ToolCallParser::emit_text(std::string_view bytes, std::vector<ToolCallEvent>& out) {
  utf8_tail_.append(bytes);
  const size_t n = tokenizer::complete_prefix_length(utf8_tail_);
  if (n == 0) return;
  ToolCallEvent e;
  e.text = tokenizer::to_valid_utf8(std::string_view(utf8_tail_).substr(0, n));
  utf8_tail_.erase(0, n);
  out.push_back(std::move(e));
}

void ToolCallParser::malformed(std::vector<ToolCallEvent>& out) {
  state_ = State::Text;
  in_marker_ = false;
  std::string held;
  held.swap(held_);
  emit_text(held, out);
}

bool ToolCallParser::finish_argument() {
  if (!valid_utf8(key_) || !valid_utf8(value_)) return false;
  std::string value;
  if (type_ == k3::kTypeString) {
    value = json_string(value_);
  } else {
    const auto j = parse_json(value_);
    if (!j) return false;
    const bool fits = (type_ == k3::kTypeNumber && j->is_number()) || (type_ == k3::kTypeBoolean && j->is_boolean()) ||
                      (type_ == k3::kTypeNull && j->is_null()) || (type_ == k3::kTypeObject && j->is_object()) ||
                      (type_ == k3::kTypeArray && j->is_array());
    if (!fits) return false;
    value = value_;  // already JSON: keep the model's spelling (exact numbers)
  }
  if (args_count_++) args_ += ',';
  args_ += json_string(key_) + ":" + value;
  return true;
}

bool ToolCallParser::on_open(std::string_view body) {
  const auto tag = parse_tag(body);
  if (!tag) return false;
  if (state_ == State::Top) {
    if (tag->name != "tools" || !tag->attrs.empty()) return false;
    state_ = State::Tools;
    return true;
  }
  if (state_ == State::Tools) {
    if (tag->name != "call" || !only_keys(*tag, {"tool", "index"})) return false;
    const std::string* tool = tag->attr("tool");
    const std::string* index = tag->attr("index");
    if (!tool || tool->empty() || !valid_utf8(*tool)) return false;
    if (index && (index->empty() || !std::all_of(index->begin(), index->end(), [](char c) { return c >= '0' && c <= '9'; })))
      return false;
    name_ = *tool;
    args_.clear();
    args_count_ = 0;
    state_ = State::Call;
    return true;
  }
  if (state_ == State::Call) {
    if (tag->name == "argument" && only_keys(*tag, {"key", "type"})) {
      const std::string* key = tag->attr("key");
      const std::string* type = tag->attr("type");
      if (!key || !type) return false;
      const std::string_view types[] = {k3::kTypeString, k3::kTypeNumber, k3::kTypeBoolean,
                                        k3::kTypeNull,   k3::kTypeObject, k3::kTypeArray};
      if (std::find(std::begin(types), std::end(types), *type) == std::end(types)) return false;
      key_ = *key;
      type_ = *type;
      value_.clear();
      state_ = State::Argument;
      return true;
    }
    if (tag->name == "json" && args_count_ == 0 && tag->attrs.size() == 1 && tag->attr("type") &&
        *tag->attr("type") == k3::kTypeObject) {
      value_.clear();
      state_ = State::Json;
      return true;
    }
  }
  return false;
}

bool ToolCallParser::on_close(std::string_view name, std::vector<ToolCallEvent>& out) {
  if (state_ == State::Argument && name == "argument") {
    if (!finish_argument()) return false;
    state_ = State::Call;
    return true;
  }
  if (state_ == State::Json && name == "json") {
    const auto j = parse_json(value_);
    if (!j || !j->is_object()) return false;
    args_ = value_;
    state_ = State::CallDone;
    return true;
  }
  if ((state_ == State::Call || state_ == State::CallDone) && name == "call") {
    ToolCallEvent e;
    e.kind = ToolCallEvent::Kind::Call;
    e.call.index = calls_;
    e.call.id = id_prefix_ + std::to_string(calls_);
    e.call.name = name_;
    e.call.arguments = state_ == State::Call ? "{" + args_ + "}" : args_;
    out.push_back(std::move(e));
    ++calls_;
    held_.clear();
    state_ = State::Tools;
    return true;
  }
  if (state_ == State::Tools && name == "tools") {
    held_.clear();
    state_ = State::AfterTools;
    return true;
  }
  if ((state_ == State::Top || state_ == State::AfterTools) && name == "message") {
    held_.clear();
    state_ = State::Done;
    return true;
  }
  return false;
}

void ToolCallParser::on_marker(bool open, std::string_view body, std::vector<ToolCallEvent>& out) {
  const bool ok = open ? on_open(body) : on_close(body, out);
  if (!ok) malformed(out);
}

void ToolCallParser::push(std::string_view piece, bool special, std::vector<ToolCallEvent>& out) {
  if (state_ == State::Text) return emit_text(piece, out);
  held_.append(piece);
  if (special) {
    if (piece == k3::kOpen || piece == k3::kClose) {
      const bool in_value = state_ == State::Argument || state_ == State::Json;
      if (in_marker_ || (in_value && piece == k3::kOpen)) return malformed(out);
      in_marker_ = true;
      marker_open_ = piece == k3::kOpen;
      marker_.clear();
      return;
    }
    if (piece == k3::kSep && in_marker_) {
      in_marker_ = false;
      return on_marker(marker_open_, marker_, out);
    }
    if (piece == k3::kEndOfMsg && state_ == State::Done && !in_marker_) {
      held_.clear();
      return;
    }
    return malformed(out);  // any other special where it does not belong
  }
  if (in_marker_) {
    marker_.append(piece);
    if (marker_.size() > kMaxMarker) malformed(out);
    return;
  }
  if (state_ == State::Argument || state_ == State::Json) {
    value_.append(piece);
    return;
  }
  if (!is_blank(piece)) malformed(out);  // blank text between tags is layout
}

void ToolCallParser::finish(std::vector<ToolCallEvent>& out) {
  const bool unfinished = in_marker_ || state_ == State::Call || state_ == State::Argument ||
                          state_ == State::Json || state_ == State::CallDone;
  if (unfinished) malformed(out);
  held_.clear();
  in_marker_ = false;
  if (!utf8_tail_.empty()) {
    ToolCallEvent e;
    e.text = tokenizer::to_valid_utf8(utf8_tail_);
    utf8_tail_.clear();
    out.push_back(std::move(e));
  }
  if (state_ != State::Text) state_ = State::Done;
}

ParsedToolOutput parse_tool_calls(const std::vector<tokenizer::ChatSegment>& pieces, const std::string& id_prefix) {
  ToolCallParser parser(id_prefix);
  std::vector<ToolCallEvent> events;
  for (const auto& p : pieces) parser.push(p.text, p.control, events);
  parser.finish(events);
  ParsedToolOutput out;
  for (auto& e : events) {
    if (e.kind == ToolCallEvent::Kind::Call) out.calls.push_back(std::move(e.call));
    else out.text += e.text;
  }
  return out;
}

}  // namespace deltafin::server
