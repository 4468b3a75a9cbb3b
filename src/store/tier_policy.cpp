#include "store/tier_policy.h"

#include <algorithm>

namespace deltafin {

size_t tier_window(size_t slots, size_t requests_per_token) {
  if (requests_per_token == 0) return slots / 16;
  // A window that cannot hold one token's requests evicts a token's experts
  // before the next token could reuse them: it only takes slots from the
  // frequency part (on a K3-statistics trace at 0.4% of the experts, 1.5%
  // of requests from RAM with it, 3.6% without; docs/guide/drives-and-ram-tier.md).
  if (requests_per_token > slots / 2) return 0;
  // Routing persists over a few tokens, not only to the next one: a window of
  // kWindowTokens tokens' requests, at most half the slots (docs/results/2026-12-ram-tier.md,
  // "The window's length").
  return std::min(kWindowTokens * requests_per_token, slots / 2);
}

TierPolicy::TierPolicy(size_t keys, size_t slots, uint64_t age_every, size_t window)
    : score_(keys, 0.0),
      key_slot_(keys, -1),
      slot_key_(slots, -1),
      slot_window_(slots, 0),
      last_use_(keys, 0),
      window_slots_(std::min(window == kDefaultWindow ? tier_window(slots, 0) : window, slots / 2)),
      age_every_(age_every ? age_every : std::max<uint64_t>(1024, 8 * uint64_t(slots))) {
  free_.reserve(slots);
  for (size_t s = slots; s-- > 0;) free_.push_back(int(s));  // slot 0 first
}

void TierPolicy::set_window(int slot, bool in) {
  char& w = slot_window_[size_t(slot)];
  if (w && !in) --in_window_;
  if (!w && in) ++in_window_;
  w = in ? 1 : 0;
}

int TierPolicy::take_slot(int key, int slot, bool to_window) {
  slot_key_[size_t(slot)] = key;
  set_window(slot, to_window);
  return slot;
}

void TierGroups::run(const std::vector<int>& group, std::vector<int>* misses) {
  misses->clear();
  fills_.clear();
  pins_.clear();
  for (int key : group) {
    policy_.use(key);
    ++requests;
    const int s = policy_.slot_of(key);
    if (s >= 0) pinned_[size_t(s)] = 1, pins_.push_back(s), ++hits;
    else misses->push_back(key);
  }
  for (int key : *misses) {
    int evicted = -1;
    const int s = policy_.admit(key, [&](int slot) { return pinned_[size_t(slot)] != 0; }, &evicted);
    if (s >= 0) pinned_[size_t(s)] = 1, pins_.push_back(s), fills_.push_back({s, key});
  }
  for (const auto& [s, key] : fills_) policy_.publish(s, key);
  for (int s : pins_) pinned_[size_t(s)] = 0;  // only this group's pins: a group is small, the tier is not
  pins_.clear();
}

void TierPolicy::seed(int key, double score) {
  const int s = key_slot_[size_t(key)];
  const bool main = s >= 0 && !slot_window_[size_t(s)];
  if (main) resident_.erase({score_[size_t(key)], key});
  score_[size_t(key)] = score;
  if (main) resident_.insert({score, key});
}

void TierPolicy::use(int key) {
  seed(key, score_[size_t(key)] + 1);
  ++uses_;
  const int s = key_slot_[size_t(key)];
  if (s >= 0 && slot_window_[size_t(s)]) {  // most recently used now
    window_.erase({last_use_[size_t(key)], key});
    window_.insert(window_.end(), {uses_, key});
  }
  last_use_[size_t(key)] = uses_;
  if (uses_ % age_every_ == 0) age();
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
    set_window(slot, false);
    free_.push_back(slot);
    return;
  }
  slot_key_[size_t(slot)] = key;
  key_slot_[size_t(key)] = slot;
  if (slot_window_[size_t(slot)])
    window_.insert({last_use_[size_t(key)], key});
  else
    resident_.insert({score_[size_t(key)], key});
}

void TierPolicy::abandon(int slot) {
  const int key = slot_key_[size_t(slot)];
  if (key >= 0 && key_slot_[size_t(key)] == slot) {  // resident (not a fill in flight)
    if (slot_window_[size_t(slot)])
      window_.erase({last_use_[size_t(key)], key});
    else
      resident_.erase({score_[size_t(key)], key});
    key_slot_[size_t(key)] = -1;
  }
  slot_key_[size_t(slot)] = -1;
  set_window(slot, false);
  free_.push_back(slot);
}

}  // namespace deltafin
