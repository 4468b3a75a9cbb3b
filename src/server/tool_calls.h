// Parses K3's tool-call output back into OpenAI-shaped tool calls. After its
// response channel closes, the model writes calls the way the chat template
// renders them (docs/design/tokenizer.md):
//
//   <|open|>tools<|sep|>
//     <|open|>call tool="NAME" index="1"<|sep|>
//       <|open|>argument key="K" type="string|number|boolean|null|object|array"<|sep|>VALUE<|close|>argument<|sep|>
//       ... or one <|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>
//     <|close|>call<|sep|>
//   <|close|>tools<|sep|><|close|>message<|sep|>
//
// Pure and incremental: feed the output piece by piece (a special token's
// spelling, or an ordinary token's bytes, which may split characters), get
// events as soon as they are certain. A call is emitted whole when its
// `<|close|>call<|sep|>` arrives and it is well-formed; its arguments are a
// JSON object text. Anything malformed — from the start of the first bad call
// or stray text on — comes back as plain text (markers spelled), never as a
// call and never as an error. Text events are valid UTF-8.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat.h"

namespace deltafin::server {

struct ToolCall {
  size_t index = 0;       // position among this output's calls, from 0
  std::string id;         // id_prefix + index
  std::string name;
  std::string arguments;  // a JSON object, as text
  bool operator==(const ToolCall&) const = default;
};

struct ToolCallEvent {
  enum class Kind : uint8_t { Text, Call };
  Kind kind = Kind::Text;
  std::string text;  // Kind::Text
  ToolCall call;     // Kind::Call
  bool operator==(const ToolCallEvent&) const = default;
};

class ToolCallParser {
 public:
  explicit ToolCallParser(std::string id_prefix = "call_") : id_prefix_(std::move(id_prefix)) {}

  // One piece of output; `special` says it is a special token's spelling.
  void push(std::string_view piece, bool special, std::vector<ToolCallEvent>& out);
  // End of output: an unfinished call or marker comes back as text.
  void finish(std::vector<ToolCallEvent>& out);

  // Bytes held back (an unfinished call or marker) that a later piece decides.
  bool holding() const { return !held_.empty() || !utf8_tail_.empty(); }
  size_t calls() const { return calls_; }

 private:
  enum class State : uint8_t { Top, Tools, Call, Argument, Json, CallDone, AfterTools, Done, Text };
  void on_marker(bool open, std::string_view body, std::vector<ToolCallEvent>& out);
  bool on_open(std::string_view body);
  bool on_close(std::string_view name, std::vector<ToolCallEvent>& out);
  bool finish_argument();
  void malformed(std::vector<ToolCallEvent>& out);
  void emit_text(std::string_view bytes, std::vector<ToolCallEvent>& out);

  std::string id_prefix_;
  State state_ = State::Top;
  size_t calls_ = 0;
  std::string held_;  // raw output since the last commit point, returned as text if malformed
  bool in_marker_ = false, marker_open_ = false;
  std::string marker_;  // tag text between <|open|>/<|close|> and <|sep|>
  // The call being read.
  std::string name_, args_, value_, key_, type_;
  size_t args_count_ = 0;
  std::string utf8_tail_;  // an incomplete character at the end of text output
};

// Whole-output convenience: pieces (control = special) -> calls and text.
struct ParsedToolOutput {
  std::vector<ToolCall> calls;
  std::string text;
};
ParsedToolOutput parse_tool_calls(const std::vector<tokenizer::ChatSegment>& pieces, const std::string& id_prefix = "call_");

}  // namespace deltafin::server
