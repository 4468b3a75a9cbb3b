// Turns generated token ids into text deltas. Raw completions: every token's
// bytes (specials spelled), as `deltafin run` prints them. Chat (docs/design/tokenizer.md):
// the model writes reasoning, `<|close|>think<|sep|><|open|>response<|sep|>`,
// the answer, then closing markers; reasoning goes to `reasoning_content`,
// the answer to `content`, and control markers are never shown, not even in
// part. Every delta is valid UTF-8, and the deltas of a channel concatenate to
// Tokenizer::decode of that channel's ordinary tokens. With tools (a chat
// request that declared some), what the model writes after its response
// closes goes to the tool-call parser (server/tool_calls.h): each complete,
// well-formed call is one Tool delta, anything malformed comes back as
// content text.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/tool_calls.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::server {

enum class Channel : uint8_t { Text, Reasoning, Content, Tool };

struct Delta {
  Channel channel;
  std::string text;  // Text, Reasoning, Content
  ToolCall call{};   // Tool: one whole call
  bool operator==(const Delta&) const = default;
};

class OutputFilter {
 public:
  // chat=false: raw text. chat=true: the prompt ended inside
  // `<|open|>think<|sep|>` (thinking) or `<|open|>response<|sep|>` (not).
  // tool_id_prefix: non-empty turns on tool-call parsing (call ids are the prefix + index).
  static Result<OutputFilter> create(const tokenizer::Tokenizer& tok, bool chat, bool thinking = true,
                                     std::string tool_id_prefix = "");
  // One generated token (stop tokens are not passed); appends non-empty deltas.
  Status push(uint32_t id, std::vector<Delta>& out);
  // End of generation: flushes held-back bytes and an unfinished marker's text.
  Status finish(std::vector<Delta>& out);
  size_t tool_calls() const { return tools_ ? tools_->calls() : 0; }

 private:
  OutputFilter(const tokenizer::Tokenizer& tok, bool chat) : tok_(tok), chat_(chat), dec_(tok) {}
  Status emit_ordinary(uint32_t id, std::vector<Delta>& out);
  Status switch_to(std::optional<Channel> ch, std::vector<Delta>& out);
  Status abort_marker(std::vector<Delta>& out);
  void tool_events(std::vector<ToolCallEvent>& events, std::vector<Delta>& out);

  tokenizer::Tokenizer tok_;
  bool chat_;
  tokenizer::StreamDecoder dec_;
  std::optional<Channel> channel_;  // nullopt: hidden (after the response closed)
  uint32_t open_id_ = 0, close_id_ = 0, sep_id_ = 0;
  // A marker being read: <|open|> or <|close|>, then name tokens until <|sep|>.
  bool in_marker_ = false, marker_open_ = false;
  std::string marker_name_;
  std::vector<uint32_t> marker_tokens_;
  std::optional<ToolCallParser> tools_;
  bool response_closed_ = false;  // after <|close|>response<|sep|>: the tool parser's output
};

}  // namespace deltafin::server
