#include "server/stop_strings.h"

#include <algorithm>

namespace deltafin::server {

namespace {
bool matched(Channel c) { return c == Channel::Text || c == Channel::Content; }
}  // namespace

void StopMatcher::flush(std::vector<Delta>& out) {
  if (!held_.empty()) out.push_back(Delta{held_channel_, std::move(held_)});
  held_.clear();
}

bool StopMatcher::push_one(const Delta& d, std::vector<Delta>& out) {
  if (stops_.empty() || !matched(d.channel)) {
    flush(out);
    out.push_back(d);
    return false;
  }
  if (d.channel != held_channel_) flush(out);
  held_channel_ = d.channel;
  // Search the held tail plus the new text: a stop string may span deltas.
  std::string text = std::move(held_);
  held_.clear();
  text += d.text;
  size_t first = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = text.find(s);
    if (at < first || (at == first && at != std::string::npos && s.size() < matched_.size())) {
      first = at;
      matched_ = s;  // the earliest; at one place, the shortest (it ends first)
    }
  }
  if (first != std::string::npos) {
    if (first > 0) out.push_back(Delta{d.channel, text.substr(0, first)});
    stopped_ = true;
    return true;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, text.size()); n > keep; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  if (text.size() > keep) out.push_back(Delta{d.channel, text.substr(0, text.size() - keep)});
  held_ = text.substr(text.size() - keep);
  return false;
}

bool StopMatcher::push(const std::vector<Delta>& in, std::vector<Delta>& out) {
  for (const Delta& d : in)
    if (!stopped_ && push_one(d, out)) return true;
  return stopped_;
}

void StopMatcher::finish(std::vector<Delta>& out) {
  if (!stopped_) flush(out);
}

}  // namespace deltafin::server
