// How `run --chat` and `chat` show a chat answer: the reasoning and the
// answer as text, never the template's control tokens (the deltas come from
// server/output_filter.h).
//
// Plain (a pipe or file, and `run --chat`): the reasoning between marker
// lines, the convention of `ollama run`:
//   Thinking...
//   <reasoning>
//   ...done thinking.
//
//   <answer>
// Terminal (`chat` at a terminal): the reasoning is folded into one dim
// status line that is rewritten in place ("Thinking... 57 tokens | <its
// latest words>") and, when the answer starts, replaced by "Thought for 57
// tokens"; /thinking prints it whole. Hidden reasoning
// (--no-thinking-display) shows no words, only the count.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "server/output_filter.h"

namespace deltafin::cli {

// The ANSI sequences the terminal display uses.
inline constexpr const char* kDim = "\033[2m";
inline constexpr const char* kReset = "\033[0m";

class ChatPrinter {
 public:
  ChatPrinter(std::FILE* out, bool terminal, bool show_thinking)
      : out_(out), terminal_(terminal), show_thinking_(show_thinking) {}

  void push(const server::Delta& d);
  // One more generated token: those before the answer are the reasoning's
  // (its markers included), which the terminal status line counts.
  void count_token() {
    if (thought_ < 0 && content_.empty()) ++tokens_;
  }
  // The answer ended (or was cut): closes an open reasoning block, ends the line.
  void finish();

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }

 private:
  void put(const std::string& s);
  void end_reasoning();
  void draw_status();

  std::FILE* out_;
  bool terminal_, show_thinking_;
  bool in_reasoning_ = false, status_drawn_ = false;
  int64_t tokens_ = 0;     // tokens decided while the reasoning was open
  int64_t thought_ = -1;   // tokens of the finished reasoning; -1: none yet
  char last_ = '\n';       // the last byte printed (lines end before a marker)
  std::string reasoning_, content_;
};

// A terminal's width in columns (80 when it cannot be asked).
int terminal_columns(std::FILE* f);

// The last characters of `text` (newlines as spaces, control characters
// dropped) that fit in `columns` terminal cells; wide characters count two.
std::string fit_tail(const std::string& text, int columns);

}  // namespace deltafin::cli
