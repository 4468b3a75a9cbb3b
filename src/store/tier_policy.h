// Which experts the RAM tier keeps: a pure, clock-free policy over slot
// numbers, so the store's tier (ram_tier.h, real memory) and the route-trace
// replay (src/sim/tier_replay.h, no memory) run the very same decisions.
//
// Frequency with ageing: every request of an expert adds 1 to its score
// (resident or not, so an expert that keeps missing earns its way in), and
// every `age_every` requests all scores halve, so the tier follows a change of
// topic. A miss takes a free slot, else the slot of the lowest-scored resident
// that is not pinned, but only when the newcomer's score is strictly higher;
// otherwise the read bypasses the tier. Scores may be seeded (the store's heat
// file) so a new process starts with yesterday's favourites winning ties.
#pragma once
#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace deltafin {

class TierPolicy {
 public:
  // `keys`: distinct experts (moe_index * experts + e); `slots`: capacity.
  // age_every 0: 8 x slots (at least 1024).
  TierPolicy(size_t keys, size_t slots, uint64_t age_every = 0);

  size_t slots() const { return slot_key_.size(); }
  size_t resident() const { return resident_.size(); }
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
  std::vector<double> score_;
  std::vector<int> key_slot_;             // resident slot of each key, -1
  std::vector<int> slot_key_;             // key resident (or being filled) in each slot, -1 free
  std::vector<int> free_;                 // free slots
  std::set<std::pair<double, int>> resident_;  // (score, key) of resident keys, lowest first
  uint64_t age_every_, uses_ = 0;
};

// The policy as the store's tier runs it over one begin()'s group of keys:
// every key looked up (and counted), then the misses admitted (hits pinned),
// the fills published at the group's end. For replays without memory (the
// trace replay, the drive simulator).
class TierGroups {
 public:
  TierGroups(size_t keys, size_t slots, uint64_t age_every = 0) : policy_(keys, slots, age_every), pinned_(slots, 0) {}
  // The keys of `group` that miss, in order (each then read from a drive).
  void run(const std::vector<int>& group, std::vector<int>* misses);
  uint64_t requests = 0, hits = 0;

 private:
  TierPolicy policy_;
  std::vector<char> pinned_;
  std::vector<std::pair<int, int>> fills_;
};

template <class Pinned>
int TierPolicy::admit(int key, Pinned pinned, int* evicted) {
  *evicted = -1;
  if (!free_.empty()) {
    const int s = free_.back();
    free_.pop_back();
    slot_key_[size_t(s)] = key;
    return s;
  }
  const double mine = score_[size_t(key)];
  for (auto it = resident_.begin(); it != resident_.end() && it->first < mine; ++it) {
    const int s = key_slot_[size_t(it->second)];
    if (pinned(s)) continue;
    *evicted = it->second;
    key_slot_[size_t(it->second)] = -1;
    resident_.erase(it);
    slot_key_[size_t(s)] = key;
    return s;
  }
  return -1;
}

}  // namespace deltafin
