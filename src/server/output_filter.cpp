#include "server/output_filter.h"

namespace deltafin::server {

namespace {
constexpr size_t kMaxMarkerName = 32;  // longer "names" are text, not a marker
}

Result<OutputFilter> OutputFilter::create(const tokenizer::Tokenizer& tok, bool chat, bool thinking,
                                          std::string tool_id_prefix) {
  OutputFilter f(tok, chat);
  if (chat && !tool_id_prefix.empty()) f.tools_.emplace(std::move(tool_id_prefix));
  if (chat) {
    DF_ASSIGN(f.open_id_, tok.special_id("<|open|>"));
    DF_ASSIGN(f.close_id_, tok.special_id("<|close|>"));
    DF_ASSIGN(f.sep_id_, tok.special_id("<|sep|>"));
    f.channel_ = thinking ? Channel::Reasoning : Channel::Content;
  } else {
    f.channel_ = Channel::Text;
  }
  return f;
}

Status OutputFilter::emit_ordinary(uint32_t id, std::vector<Delta>& out) {
  if (!channel_) return {};
  DF_ASSIGN(std::string text, dec_.push(id));
  if (!text.empty()) out.push_back({*channel_, std::move(text)});
  return {};
}

Status OutputFilter::switch_to(std::optional<Channel> ch, std::vector<Delta>& out) {
  if (ch == channel_) return {};
  std::string rest = dec_.finish();
  if (channel_ && !rest.empty()) out.push_back({*channel_, std::move(rest)});
  channel_ = ch;
  return {};
}

Status OutputFilter::abort_marker(std::vector<Delta>& out) {
  in_marker_ = false;
  std::vector<uint32_t> toks;
  toks.swap(marker_tokens_);
  marker_name_.clear();
  for (uint32_t t : toks) DF_TRY(emit_ordinary(t, out));
  return {};
}

void OutputFilter::tool_events(std::vector<ToolCallEvent>& events, std::vector<Delta>& out) {
  for (ToolCallEvent& e : events) {
    if (e.kind == ToolCallEvent::Kind::Call) out.push_back(Delta{Channel::Tool, "", std::move(e.call)});
    else if (!e.text.empty()) out.push_back(Delta{Channel::Content, std::move(e.text)});
  }
  events.clear();
}

Status OutputFilter::push(uint32_t id, std::vector<Delta>& out) {
  if (!chat_) {
    DF_ASSIGN(std::string text, dec_.push(id));
    if (!text.empty()) out.push_back({Channel::Text, std::move(text)});
    return {};
  }
  if (tools_ && response_closed_) {  // the tools block and the message close
    DF_ASSIGN(std::string_view bytes, tok_.token_bytes(id));
    std::vector<ToolCallEvent> events;
    tools_->push(bytes, tok_.is_special(id), events);
    tool_events(events, out);
    return {};
  }
  if (in_marker_) {
    if (id == sep_id_) {
      in_marker_ = false;
      marker_tokens_.clear();
      const bool response = marker_name_ == "response", think = marker_name_ == "think";
      marker_name_.clear();
      if (marker_open_ && response) return switch_to(Channel::Content, out);
      if (marker_open_ && think) return switch_to(Channel::Reasoning, out);
      if (!marker_open_ && response) {
        response_closed_ = true;
        return switch_to(std::nullopt, out);
      }
      return {};  // other markers (close think, close message, ...) only structure the text
    }
    if (!tok_.is_special(id)) {
      DF_ASSIGN(std::string_view bytes, tok_.token_bytes(id));
      marker_name_.append(bytes);
      marker_tokens_.push_back(id);
      if (marker_name_.size() <= kMaxMarkerName) return {};
      return abort_marker(out);
    }
    DF_TRY(abort_marker(out));  // a special inside a marker: the marker was not one
  }
  if (id == open_id_ || id == close_id_) {
    in_marker_ = true;
    marker_open_ = id == open_id_;
    return {};
  }
  if (tok_.is_special(id)) return {};  // control tokens are never shown as text
  return emit_ordinary(id, out);
}

Status OutputFilter::finish(std::vector<Delta>& out) {
  if (tools_ && response_closed_) {
    std::vector<ToolCallEvent> events;
    tools_->finish(events);
    tool_events(events, out);
    return {};
  }
  if (in_marker_) DF_TRY(abort_marker(out));
  std::string rest = dec_.finish();
  if (channel_ && !rest.empty()) out.push_back({*channel_, std::move(rest)});
  return {};
}

}  // namespace deltafin::server
