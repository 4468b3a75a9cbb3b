// Parses the output of models whose chat template is Qwen3's (and the
// Hermes-style convention it shares): reasoning between <think> and
// </think>, then the answer, then tool calls written as
//
//   <tool_call>
//   {"name": "NAME", "arguments": {...}}
//   </tool_call>
//
// into the same deltas as K3's OutputFilter (server/output_filter.h):
// Reasoning, Content, and one Tool delta per complete, well-formed call. A
// <think> opens reasoning only before any answer text (after at most 256
// bytes of whitespace); later ones are text.
// Tags are found in the decoded text, so a tag split across tokens (or
// written with ordinary tokens) is still a tag; text that may be the start of
// a tag is held back until the next token decides it. Special tokens (the
// end-of-turn <|im_end|> is a stop token and never arrives) are never shown.
// Newlines right after <think>, </think> and between tool calls are dropped,
// as are newlines right before </think> and <tool_call> (the template writes
// them itself when it renders the answer back). A malformed call (bad JSON,
// no name, arguments not an object) comes back as content text, tags
// included; a call cut off by the end of output too. Every delta is valid
// UTF-8.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/output_filter.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::server {

class Qwen3OutputParser {
 public:
  // in_thinking: the prompt left the model inside <think> (the output starts
  // as reasoning). Otherwise a <think> before any answer text opens reasoning.
  // tool_id_prefix: non-empty turns on tool-call parsing (ids: prefix + index).
  Qwen3OutputParser(bool in_thinking, std::string tool_id_prefix);

  // Decoded output bytes (may split characters and tags).
  void push(std::string_view bytes, std::vector<Delta>& out);
  void finish(std::vector<Delta>& out);
  size_t tool_calls() const { return calls_; }

 private:
  enum class State : uint8_t { Reasoning, Content, Call };
  void scan(std::vector<Delta>& out, bool at_end);
  void emit(Channel ch, std::string_view text, std::vector<Delta>& out);
  void end_run(bool keep_newlines, std::vector<Delta>& out);
  void on_call(std::string_view body, std::vector<Delta>& out);

  State state_;
  std::string prefix_;
  bool tools_;
  bool think_allowed_;     // no answer text yet: a <think> opens reasoning
  size_t leading_ = 0;     // whitespace bytes before it (a <think> after too many is text)
  bool after_call_ = false;  // whitespace after a call is dropped
  size_t calls_ = 0;
  std::string buf_;        // output not yet decided (a possible tag, a call's body)
  size_t call_scanned_ = 0;  // State::Call: buf_ before this holds no </tool_call>
  // The current run of one channel: text held back (trailing newlines, an
  // incomplete character) and whether it has shown anything yet.
  Channel run_ch_ = Channel::Content;
  std::string run_held_;
  bool run_started_ = false;
};

// Token ids -> deltas: ordinary tokens' bytes go to the parser, special tokens are dropped.
class Qwen3OutputFilter {
 public:
  Qwen3OutputFilter(const tokenizer::Tokenizer& tok, bool in_thinking, std::string tool_id_prefix)
      : tok_(tok), parser_(in_thinking, std::move(tool_id_prefix)) {}
  Status push(uint32_t id, std::vector<Delta>& out);
  Status finish(std::vector<Delta>& out);
  size_t tool_calls() const { return parser_.tool_calls(); }

 private:
  tokenizer::Tokenizer tok_;
  Qwen3OutputParser parser_;
};

}  // namespace deltafin::server
