#include "store/tier_policy.h"

#include <algorithm>

namespace deltafin {

TierPolicy::TierPolicy(size_t keys, size_t slots, uint64_t age_every)
    : score_(keys, 0.0),
      key_slot_(keys, -1),
      slot_key_(slots, -1),
      age_every_(age_every ? age_every : std::max<uint64_t>(1024, 8 * uint64_t(slots))) {
  free_.reserve(slots);
  for (size_t s = slots; s-- > 0;) free_.push_back(int(s));  // slot 0 first
}

void TierGroups::run(const std::vector<int>& group, std::vector<int>* misses) {
  misses->clear();
  fills_.clear();
  for (int key : group) {
    policy_.use(key);
    ++requests;
    const int s = policy_.slot_of(key);
    if (s >= 0) pinned_[size_t(s)] = 1, ++hits;
    else misses->push_back(key);
  }
  for (int key : *misses) {
    int evicted = -1;
    const int s = policy_.admit(key, [&](int slot) { return pinned_[size_t(slot)] != 0; }, &evicted);
    if (s >= 0) pinned_[size_t(s)] = 1, fills_.push_back({s, key});
  }
  for (const auto& [s, key] : fills_) policy_.publish(s, key);
  std::fill(pinned_.begin(), pinned_.end(), 0);
}

void TierPolicy::seed(int key, double score) {
  const int s = key_slot_[size_t(key)];
  if (s >= 0) resident_.erase({score_[size_t(key)], key});
  score_[size_t(key)] = score;
  if (s >= 0) resident_.insert({score, key});
}

void TierPolicy::use(int key) {
  seed(key, score_[size_t(key)] + 1);
  if (++uses_ % age_every_ == 0) age();
}

void TierPolicy::age() {
  // Halving keeps the order, so the set is rebuilt with the same sequence.
  for (auto& s : score_) s *= 0.5;
  std::set<std::pair<double, int>> next;
  for (const auto& [score, key] : resident_) next.insert(next.end(), {score * 0.5, key});
  resident_.swap(next);
}

void TierPolicy::publish(int slot, int key) {
  if (key_slot_[size_t(key)] >= 0 && key_slot_[size_t(key)] != slot) {  // already resident elsewhere: keep one copy
    slot_key_[size_t(slot)] = -1;
    free_.push_back(slot);
    return;
  }
  slot_key_[size_t(slot)] = key;
  key_slot_[size_t(key)] = slot;
  resident_.insert({score_[size_t(key)], key});
}

void TierPolicy::abandon(int slot) {
  const int key = slot_key_[size_t(slot)];
  if (key >= 0 && key_slot_[size_t(key)] == slot) {  // resident (not a fill in flight)
    resident_.erase({score_[size_t(key)], key});
    key_slot_[size_t(key)] = -1;
  }
  slot_key_[size_t(slot)] = -1;
  free_.push_back(slot);
}

}  // namespace deltafin
