// Stop strings (`stop` in both endpoints): generation ends where the visible
// text first contains one of them; the text before it is returned, the stop
// string and everything after are not. While a channel's text ends in a
// prefix of a stop string, that tail is held back (a stream never shows bytes
// that a later token turns into a stop). Matching is per channel: completions'
// text, and a chat's answer (`content`), not its reasoning; a channel switch
// flushes what was held. Held-back tails start at a UTF-8 boundary (a stop
// string starts with one), so every delta stays valid UTF-8.
#pragma once
#include <string>
#include <vector>

#include "server/output_filter.h"

namespace deltafin::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // `in`: one step's deltas from the OutputFilter; appends what may be shown.
  // Returns true when a stop string completed (then nothing more is shown).
  bool push(const std::vector<Delta>& in, std::vector<Delta>& out);
  // End of generation without a stop: the held-back tail is shown.
  void finish(std::vector<Delta>& out);
  bool stopped() const { return stopped_; }
  const std::string& matched_stop() const { return matched_; }  // the stop string that ended the text
  bool active() const { return !stops_.empty(); }

 private:
  bool push_one(const Delta& d, std::vector<Delta>& out);
  void flush(std::vector<Delta>& out);
  std::vector<std::string> stops_;
  Channel held_channel_ = Channel::Text;
  std::string held_;  // a tail of held_channel_'s text that begins some stop string
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace deltafin::server
