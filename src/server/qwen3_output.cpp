#include "server/qwen3_output.h"

#include <nlohmann/json.hpp>

#include "tokenizer/template_values.h"
#include "tokenizer/utf8.h"

namespace deltafin::server {

namespace {

constexpr std::string_view kThink = "<think>", kThinkEnd = "</think>";
constexpr std::string_view kCall = "<tool_call>", kCallEnd = "</tool_call>";
constexpr size_t kMaxLeadingSpace = 256;  // whitespace held before a possible <think>
constexpr int kMaxJsonDepth = 64;  // deeper arguments are malformed (bounds the parser's recursion)

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool all_space(std::string_view s) {
  for (char c : s)
    if (!is_space(c)) return false;
  return true;
}

// Bytes at the end of `s` that start a UTF-8 character not yet complete.
size_t incomplete_tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

bool json_too_deep(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

}  // namespace

Qwen3OutputParser::Qwen3OutputParser(bool in_thinking, std::string tool_id_prefix)
    : state_(in_thinking ? State::Reasoning : State::Content),
      prefix_(std::move(tool_id_prefix)),
      tools_(!prefix_.empty()),
      think_allowed_(!in_thinking) {
  run_ch_ = in_thinking ? Channel::Reasoning : Channel::Content;
}

void Qwen3OutputParser::emit(Channel ch, std::string_view text, std::vector<Delta>& out) {
  if (text.empty()) return;
  if (ch != run_ch_) {
    end_run(true, out);
    run_ch_ = ch;
  }
  run_held_.append(text);
  if (!run_started_) {
    const size_t first = run_held_.find_first_not_of('\n');
    run_held_.erase(0, first == std::string::npos ? run_held_.size() : first);
  }
  if (run_held_.empty()) return;
  size_t keep = run_held_.size() - (run_held_.find_last_not_of('\n') + 1);
  if (keep == 0) keep = incomplete_tail(run_held_);
  if (keep == run_held_.size()) return;
  const std::string_view show(run_held_.data(), run_held_.size() - keep);
  out.push_back({ch, tokenizer::to_valid_utf8(show)});
  run_started_ = true;
  run_held_.erase(0, show.size());
}

void Qwen3OutputParser::end_run(bool keep_newlines, std::vector<Delta>& out) {
  if (!run_held_.empty() && (keep_newlines || run_held_.find_first_not_of('\n') != std::string::npos))
    out.push_back({run_ch_, tokenizer::to_valid_utf8(run_held_)});
  run_held_.clear();
  run_started_ = false;
}

void Qwen3OutputParser::on_call(std::string_view body, std::vector<Delta>& out) {
  const auto first = body.find_first_not_of(" \t\r\n"), last = body.find_last_not_of(" \t\r\n");
  const std::string_view json = first == std::string_view::npos ? "" : body.substr(first, last - first + 1);
  using ojson = nlohmann::ordered_json;
  bool ok = !json_too_deep(json);
  std::string name, arguments;
  if (ok) {
    const ojson v = ojson::parse(json, nullptr, /*allow_exceptions=*/false);
    ok = v.is_object() && v.contains("name") && v["name"].is_string() &&
         !v["name"].get_ref<const std::string&>().empty();
    if (ok) {
      name = v["name"].get<std::string>();
      const ojson args = v.contains("arguments") ? v["arguments"] : ojson();
      if (args.is_null()) {
        arguments = "{}";
      } else if (args.is_object()) {
        arguments = tokenizer::py_json_dumps(args);
      } else if (args.is_string() && !json_too_deep(args.get_ref<const std::string&>())) {
        const ojson parsed = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        ok = parsed.is_object();
        if (ok) arguments = tokenizer::py_json_dumps(parsed);
      } else {
        ok = false;
      }
    }
  }
  if (!ok) {
    std::string text(kCall);
    text.append(body).append(kCallEnd);
    emit(Channel::Content, text, out);
    return;
  }
  end_run(false, out);
  ToolCall call;
  call.index = calls_;
  call.id = prefix_ + std::to_string(calls_);
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  ++calls_;
  out.push_back(Delta{Channel::Tool, "", std::move(call)});
}

void Qwen3OutputParser::scan(std::vector<Delta>& out, bool at_end) {
  for (;;) {
    if (state_ == State::Call) {
      // Search only what the last search could not rule out: a long call stays linear.
      const size_t end = buf_.find(kCallEnd, call_scanned_);
      call_scanned_ = buf_.size() >= kCallEnd.size() ? buf_.size() - kCallEnd.size() + 1 : 0;
      if (end == std::string::npos) {
        if (at_end) {  // cut off: the call's text is the answer's
          std::string text(kCall);
          text.append(buf_);
          buf_.clear();
          state_ = State::Content;
          emit(Channel::Content, text, out);
        }
        return;
      }
      on_call(std::string_view(buf_).substr(0, end), out);
      buf_.erase(0, end + kCallEnd.size());
      call_scanned_ = 0;
      state_ = State::Content;
      after_call_ = true;
      continue;
    }
    const bool reasoning = state_ == State::Reasoning;
    std::vector<std::string_view> tags;
    if (reasoning) tags.push_back(kThinkEnd);
    if (!reasoning && tools_) tags.push_back(kCall);
    if (!reasoning && think_allowed_) tags.push_back(kThink);
    size_t at = std::string::npos;
    std::string_view tag;
    for (auto t : tags)
      if (size_t p = buf_.find(t); p < at) at = p, tag = t;
    const Channel ch = reasoning ? Channel::Reasoning : Channel::Content;
    if (at == std::string::npos) {
      // Leading whitespace is held while a <think> may still come (a bounded amount: linear time).
      if (!reasoning && think_allowed_ && !at_end && leading_ + buf_.size() <= kMaxLeadingSpace && all_space(buf_))
        return;
      size_t hold = 0;
      if (!at_end)
        for (auto t : tags) hold = std::max(hold, partial_tag(buf_, t));
      std::string text = buf_.substr(0, buf_.size() - hold);
      buf_.erase(0, text.size());
      if (!reasoning && after_call_) {
        const size_t f = text.find_first_not_of(" \t\r\n");
        text.erase(0, f == std::string::npos ? text.size() : f);
        if (!text.empty()) after_call_ = false;
      }
      if (!reasoning && think_allowed_) {
        leading_ += text.size();
        if (!all_space(text) || leading_ > kMaxLeadingSpace) think_allowed_ = false;
      }
      emit(ch, text, out);
      return;
    }
    std::string text = buf_.substr(0, at);
    buf_.erase(0, at + tag.size());
    if (tag == kThink) {
      if (all_space(text) && leading_ + text.size() <= kMaxLeadingSpace) {
        end_run(false, out);
        state_ = State::Reasoning;
        run_ch_ = Channel::Reasoning;
      } else {  // answer text came first: the tag is text
        emit(ch, text + std::string(kThink), out);
      }
      think_allowed_ = false;
      continue;
    }
    if (!reasoning && after_call_) {
      const size_t f = text.find_first_not_of(" \t\r\n");
      text.erase(0, f == std::string::npos ? text.size() : f);
    }
    if (!all_space(text)) think_allowed_ = false, after_call_ = false;
    emit(ch, text, out);
    end_run(false, out);
    if (tag == kThinkEnd) {
      state_ = State::Content;
      run_ch_ = Channel::Content;
      think_allowed_ = false;
    } else {  // <tool_call>
      state_ = State::Call;
      call_scanned_ = 0;
      think_allowed_ = false;
    }
  }
}

void Qwen3OutputParser::push(std::string_view bytes, std::vector<Delta>& out) {
  buf_.append(bytes);
  scan(out, false);
}

void Qwen3OutputParser::finish(std::vector<Delta>& out) {
  scan(out, true);
  end_run(true, out);
}

Status Qwen3OutputFilter::push(uint32_t id, std::vector<Delta>& out) {
  if (tok_.is_special(id)) return {};  // control tokens are never shown as text
  DF_ASSIGN(std::string_view bytes, tok_.token_bytes(id));
  parser_.push(bytes, out);
  return {};
}

Status Qwen3OutputFilter::finish(std::vector<Delta>& out) {
  parser_.finish(out);
  return {};
}

}  // namespace deltafin::server
