// Which experts the RAM tier keeps: a pure, clock-free policy over slot
// numbers, so the store's tier (ram_tier.h, real memory) and the route-trace
// replay (src/sim/trace_stats.h, no memory) run the very same decisions.
//
// Frequency with ageing, behind a small recency window (the shape of
// W-TinyLFU). Every request of an expert adds 1 to its score (resident or
// not, so an expert that keeps missing earns its way in), and every
// `age_every` requests all scores halve, so the tier follows a change of
// topic. The slots are split into a window, kept in order of last use, and
// the main part, kept by score:
//  - a demand miss always enters the window (routing repeats from one token
//    to the next: about 39 % of K3's experts do, which a pure frequency count
//    never lets in); when the window is full, its least recently used
//    resident leaves it: into the main part if its score is strictly higher
//    than the main part's lowest (which is evicted), else out of the tier;
//  - with a window of 0 slots a miss takes a free slot or the main part's
//    lowest when its score is strictly higher, else it bypasses the tier.
// A prefetch guess is not a request: the store admits it only once begin()
// asks for it, as the demand miss it has then become (store_source.h), so
// the decisions are the same with or without guesses.
// Slots the caller pins are never taken. Scores may be seeded (the store's
// heat file) so a new process starts with yesterday's favourites winning ties.
#pragma once
#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace deltafin {

// The window's size: kWindowTokens tokens' expert requests (MoE layers x
// experts per token each: routing persists from one token to the next and,
// more weakly, a few tokens on), at most half the slots; or 1/16 of the slots
// when the requests per token are not known (0). When one token's requests
// are more than half the slots there is no window (0: frequency only), since
// a smaller one cannot keep a token's experts until the next token. On an
// engine trace with K3's persistence three tokens' window gives 88-90% of
// Belady at 10-25% of the experts where one token's gave 69-79%; on a trace
// without persistence it costs up to 1.2 points (docs/results/2026-12-ram-tier.md).
constexpr size_t kWindowTokens = 3;
size_t tier_window(size_t slots, size_t requests_per_token);
constexpr size_t kDefaultWindow = size_t(-1);  // tier_window(slots, 0)

class TierPolicy {
 public:
  // `keys`: distinct experts (moe_index * experts + e); `slots`: capacity.
  // age_every 0: 8 x slots (at least 1024). window: slots of the recency
  // window (kDefaultWindow: tier_window(slots, 0); at most slots / 2).
  TierPolicy(size_t keys, size_t slots, uint64_t age_every = 0, size_t window = kDefaultWindow);

  size_t slots() const { return slot_key_.size(); }
  size_t window() const { return window_slots_; }
  size_t resident() const { return resident_.size() + window_.size(); }
  size_t resident_in_window() const { return window_.size(); }
  size_t free_slots() const { return free_.size(); }
  void seed(int key, double score);
  // Counts one request of `key` (call once per begin() that asks for it).
  void use(int key);
  // The slot holding `key`'s verified bytes, -1 if none.
  int slot_of(int key) const { return key_slot_[size_t(key)]; }
  // For a miss: a slot that `key`'s read may fill, taken from the policy's
  // view at once (the evicted resident, if any, is gone: `*evicted` gets its
  // key, else -1); -1: bypass. Slots with pinned(slot) true are never taken.
  template <class Pinned>
  int admit(int key, Pinned pinned, int* evicted);
  // The read into `slot` verified: `key` becomes resident there (if it is
  // resident in another slot already, this slot is freed instead).
  void publish(int slot, int key);
  // The read into `slot` failed or was dropped: the slot is free again.
  void abandon(int slot);
  double score(int key) const { return score_[size_t(key)]; }

 private:
  void age();
  // The main part's lowest unpinned resident with a score below `than`, or end().
  template <class Pinned>
  std::set<std::pair<double, int>>::iterator lowest_below(double than, Pinned pinned);
  // `slot` is `key`'s now (being filled), in the window or the main part.
  int take_slot(int key, int slot, bool to_window);
  void set_window(int slot, bool in);  // keeps in_window_ the count of window slots in use
  std::vector<double> score_;
  std::vector<int> key_slot_;             // resident slot of each key, -1
  std::vector<int> slot_key_;             // key resident (or being filled) in each slot, -1 free
  std::vector<char> slot_window_;         // the slot belongs to the window (else to the main part)
  std::vector<uint64_t> last_use_;        // uses_ at each key's last request
  std::vector<int> free_;                 // free slots
  std::set<std::pair<double, int>> resident_;    // main part: (score, key), lowest first
  std::set<std::pair<uint64_t, int>> window_;    // window: (last use, key), least recent first
  size_t window_slots_ = 0, in_window_ = 0;      // in_window_: window slots resident or being filled
  uint64_t age_every_, uses_ = 0;
};

// The policy as the store's tier runs it over one begin()'s group of keys:
// every key looked up (and counted), then the misses admitted (hits pinned),
// the fills published at the group's end. For replays without memory (the
// trace replay, the drive simulator).
class TierGroups {
 public:
  TierGroups(size_t keys, size_t slots, uint64_t age_every = 0, size_t window = kDefaultWindow)
      : policy_(keys, slots, age_every, window), pinned_(slots, 0) {}
  // The keys of `group` that miss, in order (each then read from a drive).
  void run(const std::vector<int>& group, std::vector<int>* misses);
  uint64_t requests = 0, hits = 0;

 private:
  TierPolicy policy_;
  std::vector<char> pinned_;
  std::vector<int> pins_;  // slots pinned by the current group
  std::vector<std::pair<int, int>> fills_;
};

template <class Pinned>
std::set<std::pair<double, int>>::iterator TierPolicy::lowest_below(double than, Pinned pinned) {
  for (auto it = resident_.begin(); it != resident_.end() && it->first < than; ++it)
    if (!pinned(key_slot_[size_t(it->second)])) return it;
  return resident_.end();
}

template <class Pinned>
int TierPolicy::admit(int key, Pinned pinned, int* evicted) {
  *evicted = -1;
  const bool window = window_slots_ > 0;
  if (!free_.empty()) {
    const int s = free_.back();
    free_.pop_back();
    return take_slot(key, s, window && in_window_ < window_slots_);
  }
  const double mine = score_[size_t(key)];
  if (window && in_window_ >= window_slots_) {
    // The window's least recently used unpinned resident makes room.
    for (auto w = window_.begin(); w != window_.end(); ++w) {
      const int ws = key_slot_[size_t(w->second)];
      if (pinned(ws)) continue;
      const int wk = w->second;
      window_.erase(w);
      auto low = lowest_below(score_[size_t(wk)], pinned);
      if (low == resident_.end()) {  // not better than the main part's lowest: out of the tier
        *evicted = wk;
        key_slot_[size_t(wk)] = -1;
        return take_slot(key, ws, true);
      }
      // It moves to the main part (keeping its slot); the main part's lowest leaves.
      const int lk = low->second, ls = key_slot_[size_t(lk)];
      resident_.erase(low);
      key_slot_[size_t(lk)] = -1;
      *evicted = lk;
      set_window(ws, false);
      resident_.insert({score_[size_t(wk)], wk});
      return take_slot(key, ls, true);
    }
    // Every window resident is pinned (or filling): try the main part as below.
  }
  auto low = lowest_below(mine, pinned);
  if (low == resident_.end()) return -1;
  const int lk = low->second, ls = key_slot_[size_t(lk)];
  resident_.erase(low);
  key_slot_[size_t(lk)] = -1;
  *evicted = lk;
  return take_slot(key, ls, window && in_window_ < window_slots_);
}

}  // namespace deltafin
