// The RAM tier of expert spans: a fixed number of span-sized slots in one
// anonymous mapping (huge-page advised, locked as pages fault in where the
// memory-lock limit allows), holding experts whose reads already arrived and
// verified, chosen by TierPolicy. Slots are filled by the read engine's own
// reads (the store source points a miss's read at a tier slot), so a fill
// costs no extra read and no copy (a prefetch guess, read into the arena
// before it was asked for, is not copied either: once it is claimed, its
// arena buffer and the slot reserved for it trade places, adopt()); a slot is
// published only after its read's checksum and MXFP4 scales checked, so a
// corrupted read never enters.
// Single-threaded by design: only the store source's begin()/prefetch()
// (the engine's MoE thread) calls it; the I/O threads write into reserved
// slots and compute threads read pinned ones, both synchronised by the read
// engine's handles.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/memory_limit.h"
#include "core/result.h"
#include "store/tier_policy.h"

namespace deltafin {

struct RamTierStats {
  uint64_t hits = 0;       // requests served from a resident slot
  uint64_t misses = 0;     // requests read from a drive
  uint64_t fills = 0;      // reads published into a slot
  uint64_t bypassed = 0;   // misses the policy did not admit (read into the arena)
  uint64_t evictions = 0;  // residents dropped for a newcomer
  uint64_t abandoned = 0;  // reserved slots whose read failed or was dropped
  uint64_t adopted = 0;    // fills that took a claimed guess's buffer as the slot (adopt)
};

class RamTier {
 public:
  // floor(budget / span) slots (0 slots: an error, the caller turns the tier off).
  // age_every: TierPolicy's (0: its default); requests_per_token sizes its
  // recency window (tier_window; 0: unknown).
  static Result<std::unique_ptr<RamTier>> create(uint64_t budget_bytes, uint64_t span_bytes, size_t keys,
                                                 uint64_t age_every = 0, size_t requests_per_token = 0);
  ~RamTier();
  RamTier(const RamTier&) = delete;
  RamTier& operator=(const RamTier&) = delete;

  size_t slots() const { return policy_.slots(); }
  uint64_t bytes() const { return uint64_t(slots()) * span_; }
  bool locked() const { return locked_; }  // mlock held (else the pages may be swapped)
  const std::string& lock_note() const { return lock_note_; }
  double populate_seconds() const { return populate_seconds_; }  // faulting the slots in at create()
  TierPolicy& policy() { return policy_; }
  const TierPolicy& policy() const { return policy_; }

  // A request of `key` by begin(): counts it; the resident bytes (pinned
  // until unpin_all()) or nullptr for a miss.
  const uint8_t* lookup(int key);
  // A slot for a miss's read (pinned), or nullptr: bypass. Counts the miss
  // as bypassed when it returns nullptr.
  uint8_t* reserve(int key);
  // The read into `slot` (from reserve) verified / failed or dropped.
  void publish(uint8_t* slot, int key);
  void abandon(uint8_t* slot);
  // The slot reserved at `reserved` (not yet published) takes `filled`, a
  // span-sized buffer from outside the tier that holds its verified bytes,
  // as its memory; returns the slot's old memory, which the caller owns in
  // `filled`'s place (the read arena gets it back). A swap of two buffers
  // instead of a copy of one: the tier's size and the process's memory stay
  // the same. Locks `filled` as the tier's own pages are locked.
  uint8_t* adopt(uint8_t* reserved, uint8_t* filled);
  uint64_t span_bytes() const { return span_; }
  // Ends a begin(): its hits and fills may be evicted again.
  void unpin_all();
  bool resident(int key) const { return policy_.slot_of(key) >= 0; }
  const RamTierStats& stats() const { return stats_; }

 private:
  RamTier(size_t slots, uint64_t span, size_t keys, uint64_t age_every, size_t window)
      : policy_(keys, slots, age_every, window), span_(span), pinned_(slots, 0) {}
  uint8_t* slot_ptr(int s) const { return mem_[size_t(s)]; }
  int slot_index(const uint8_t* p) const { return index_.at(p); }
  TierPolicy policy_;
  uint64_t span_;
  uint8_t* base_ = nullptr;
  uint64_t mapped_ = 0;
  bool locked_ = false;
  double populate_seconds_ = 0;
  std::string lock_note_;
  std::vector<char> pinned_;
  std::vector<int> pinned_list_;
  // Each slot's memory: its place in the mapping at first, any span-sized
  // buffer after adopt(); and back from memory to slot.
  std::vector<uint8_t*> mem_;
  std::unordered_map<const uint8_t*, int> index_;
  RamTierStats stats_;
};

// The tier's size for --ram-experts-gb auto: what the process may still use
// (MemAvailable, or its memory cgroup's limit less its use where that is
// lower: core/memory_limit.h) after the spine (counted whole: its mapped
// pages compete for the same memory), the read arena, the per-sequence state
// and a margin (the larger of 2 GiB and 5 % of the memory it may use), never
// below 0. `line` gets the arithmetic for the log.
struct AutoTierSize {
  uint64_t bytes = 0;
  std::string line;
};
Result<AutoTierSize> auto_tier_bytes(uint64_t spine_bytes, uint64_t arena_bytes, uint64_t session_bytes);
AutoTierSize auto_tier_bytes(const MemoryLimit& mem, uint64_t spine_bytes, uint64_t arena_bytes, uint64_t session_bytes);

}  // namespace deltafin
