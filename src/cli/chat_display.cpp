#include "cli/chat_display.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cwchar>
#include <vector>

namespace deltafin::cli {

int terminal_columns(std::FILE* f) {
  struct winsize ws {};
  if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::string fit_tail(const std::string& text, int columns) {
  // Decode to (start, length, width) per character; invalid bytes are skipped.
  struct Char {
    size_t at, len;
    int width;
  };
  std::vector<Char> chars;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > text.size()) {
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    bool ok = true;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      ok = ok && (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok) {
      ++i;
      continue;
    }
    int width = 1;
    if (cp < 0x20 || cp == 0x7F) width = (cp == '\n' || cp == '\t') ? 1 : 0;  // shown as a space, or dropped
    else if (cp >= 0x80) {
      const int w = wcwidth(wchar_t(cp));
      width = w < 0 ? 2 : w;  // unknown to the locale: assume wide, so the line never wraps
    }
    if (width > 0) chars.push_back({i, len, width});
    i += len;
  }
  std::string out;
  int used = 0;
  size_t first = chars.size();
  while (first > 0 && used + chars[first - 1].width <= columns) used += chars[--first].width;
  for (size_t k = first; k < chars.size(); ++k) {
    const char c = text[chars[k].at];
    if (chars[k].len == 1 && (c == '\n' || c == '\t')) out += ' ';
    else out.append(text, chars[k].at, chars[k].len);
  }
  return out;
}

void ChatPrinter::put(const std::string& s) {
  if (s.empty()) return;
  std::fwrite(s.data(), 1, s.size(), out_);
  last_ = s.back();
}

void ChatPrinter::draw_status() {
  const int columns = terminal_columns(out_);
  std::string line = fmt::format("Thinking... {} tokens", tokens_);
  if (show_thinking_) {
    const int room = columns - int(line.size()) - 4;
    if (room > 8) line += " | " + fit_tail(reasoning_, room);
  }
  std::fprintf(out_, "\r\033[2K%s%s%s", kDim, line.c_str(), kReset);
  status_drawn_ = true;
}

void ChatPrinter::end_reasoning() {
  if (!in_reasoning_) return;
  in_reasoning_ = false;
  thought_ = tokens_;
  if (terminal_) {
    if (status_drawn_) std::fprintf(out_, "\r\033[2K");
    status_drawn_ = false;
    if (show_thinking_) std::fprintf(out_, "%sThought for %lld tokens (/thinking shows it)%s\n", kDim, (long long)thought_, kReset);
    last_ = '\n';
  } else if (show_thinking_) {
    if (last_ != '\n') put("\n");
    put("...done thinking.\n\n");
  }
}

void ChatPrinter::push(const server::Delta& d) {
  switch (d.channel) {
    case server::Channel::Reasoning:
      reasoning_ += d.text;
      if (!in_reasoning_ && thought_ < 0) {
        in_reasoning_ = true;
        if (!terminal_ && show_thinking_) {
          if (last_ != '\n') put("\n");
          put("Thinking...\n");
        }
      }
      if (!in_reasoning_) return;  // reasoning after the answer began: kept, not shown
      if (terminal_) draw_status();
      else if (show_thinking_) put(d.text);
      break;
    case server::Channel::Content:
    case server::Channel::Text:
      end_reasoning();
      content_ += d.text;
      put(d.text);
      break;
    case server::Channel::Tool:  // no tools are declared in a terminal chat; shown as text if ever
      end_reasoning();
      put(fmt::format("[tool call {} {}]\n", d.call.name, d.call.arguments));
      break;
  }
  std::fflush(out_);
}

void ChatPrinter::finish() {
  if (in_reasoning_ && terminal_ && tokens_ > 0) {
    if (status_drawn_) std::fprintf(out_, "\r\033[2K");
    status_drawn_ = false;
    in_reasoning_ = false;
    thought_ = tokens_;
    std::fprintf(out_, "%sThought for %lld tokens, no answer (/thinking shows it)%s\n", kDim, (long long)thought_, kReset);
    last_ = '\n';
  }
  end_reasoning();
  if (last_ != '\n') put("\n");
  std::fflush(out_);
}

}  // namespace deltafin::cli
