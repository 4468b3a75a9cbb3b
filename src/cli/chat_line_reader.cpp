#include "cli/chat_line_reader.h"

#include <histedit.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cwchar>
#include <utility>

namespace deltafin::cli {

namespace {

// Waits until fd 0 is readable: true, or false once `*interrupted` is set.
// SIGINT is blocked from the check of the flag until ppoll unblocks it, so a
// SIGINT that comes in between is not lost (it ends the ppoll instead).
bool wait_readable(const volatile std::sig_atomic_t* interrupted) {
  sigset_t sigint, old;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  for (;;) {
    sigprocmask(SIG_BLOCK, &sigint, &old);
    if (*interrupted) {
      sigprocmask(SIG_SETMASK, &old, nullptr);
      return false;
    }
    struct pollfd fd {STDIN_FILENO, POLLIN, 0};
    sigset_t during = old;
    sigdelset(&during, SIGINT);
    const int n = ppoll(&fd, 1, nullptr, &during);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let read() report the error
  }
}

// Lines from file descriptor 0, read with read(2) so that SIGINT (handled
// without SA_RESTART) ends a blocked read at once.
class PipeReader final : public LineReader {
 public:
  explicit PipeReader(const volatile std::sig_atomic_t* interrupted) : interrupted_(interrupted) {}

  std::optional<std::string> read(const std::string&) override {
    for (;;) {
      if (*interrupted_) return std::nullopt;
      if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (eof_) {
        if (buf_.empty()) return std::nullopt;
        return std::exchange(buf_, std::string());  // a last line without a newline
      }
      if (!wait_readable(interrupted_)) return std::nullopt;
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n > 0) buf_.append(chunk, size_t(n));
      else if (n == 0 || errno != EINTR) eof_ = true;
    }
  }

 private:
  const volatile std::sig_atomic_t* interrupted_;
  std::string buf_;
  bool eof_ = false;
};

// libedit's own interface (histedit.h): emacs keys, the user's ~/.editrc,
// and a history of the session's lines.
class EditLineReader final : public LineReader {
 public:
  explicit EditLineReader(const volatile std::sig_atomic_t* interrupted) : interrupted_(interrupted) {
    hist_ = history_init();
    HistEvent ev;
    history(hist_, &ev, H_SETSIZE, 1000);
    history(hist_, &ev, H_SETUNIQUE, 1);
    el_ = el_init("deltafin", stdin, stdout, stderr);
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_PROMPT, &EditLineReader::prompt_of);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_HIST, history, hist_);
    el_set(el_, EL_SIGNAL, 0);  // our SIGINT handler stays in place
    el_set(el_, EL_GETCFN, &EditLineReader::read_char);  // ends the line's editing on SIGINT
    el_source(el_, nullptr);
  }
  ~EditLineReader() override {
    el_end(el_);
    history_end(hist_);
  }

  std::optional<std::string> read(const std::string& prompt) override {
    prompt_ = prompt;
    if (*interrupted_) return std::nullopt;
    int count = 0;
    const char* line = el_gets(el_, &count);
    if (!line || count <= 0 || *interrupted_) return std::nullopt;
    std::string s(line, size_t(count));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }

  void remember(const std::string& line) override {
    HistEvent ev;
    history(hist_, &ev, H_ENTER, line.c_str());
  }

 private:
  // One character from fd 0 (UTF-8 or the locale's encoding): 1, 0 at the
  // end of input, -1 when interrupted or on an error (el_gets returns null).
  static int read_char(EditLine* el, wchar_t* out) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    const auto* reader = static_cast<const EditLineReader*>(self);
    std::mbstate_t state{};
    char bytes[MB_LEN_MAX];
    size_t have = 0;
    for (;;) {
      if (!wait_readable(reader->interrupted_)) {
        errno = EINTR;
        return -1;
      }
      const ssize_t n = ::read(STDIN_FILENO, bytes + have, 1);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      ++have;
      const size_t r = std::mbrtowc(out, bytes + have - 1, 1, &state);  // the state holds the bytes before
      if (r == size_t(-2) && have < sizeof bytes) continue;  // more bytes of this character
      if (r == size_t(-1) || r == size_t(-2)) *out = L'\uFFFD';  // not a character: shown as U+FFFD
      else if (r == 0) *out = L'\0';
      return 1;
    }
  }

  static char* prompt_of(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return const_cast<char*>(static_cast<EditLineReader*>(self)->prompt_.c_str());
  }

  const volatile std::sig_atomic_t* interrupted_;
  EditLine* el_ = nullptr;
  History* hist_ = nullptr;
  std::string prompt_;
};

}  // namespace

std::unique_ptr<LineReader> open_line_reader(bool terminal, const volatile std::sig_atomic_t* interrupted) {
  if (terminal) return std::make_unique<EditLineReader>(interrupted);
  return std::make_unique<PipeReader>(interrupted);
}

}  // namespace deltafin::cli
