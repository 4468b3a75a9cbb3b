// The user's lines for `deltafin chat`: at a terminal through libedit (line
// editing, and a history that the up arrow recalls, kept for the session);
// otherwise plain lines read from stdin, so that a pipe or a fifo can drive
// a conversation (the tests do).
#pragma once
#include <csignal>
#include <memory>
#include <optional>
#include <string>

namespace deltafin::cli {

class LineReader {
 public:
  virtual ~LineReader() = default;
  // The next line without its newline; nullopt at the end of input (Ctrl-D,
  // EOF, a read error) or when `*interrupted` became non-zero (SIGINT,
  // installed without SA_RESTART so that a blocked read returns).
  virtual std::optional<std::string> read(const std::string& prompt) = 0;
  // Adds a line to the history (terminal only).
  virtual void remember(const std::string& line) { (void)line; }
};

// `terminal`: stdin and stdout are terminals.
std::unique_ptr<LineReader> open_line_reader(bool terminal, const volatile std::sig_atomic_t* interrupted);

}  // namespace deltafin::cli
