// A bounded arena of equal, 4 KiB-aligned buffers (O_DIRECT needs aligned
// memory). Buffers are allocated lazily up to `max_slots`, several at a time
// in huge-page-backed chunks (io_buffer.h: far fewer scatter-gather segments
// per read), and reused; a prefetch may never take one of the last
// `demand_reserve` free slots, so a demand read is always admissible while
// prefetches are in flight.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/result.h"

namespace deltafin::io {

enum class Purpose { Demand = 0, Prefetch = 1 };
const char* purpose_name(Purpose p);

class AlignedArena {
 public:
  AlignedArena(uint64_t slot_bytes, size_t max_slots, size_t demand_reserve = 0);
  ~AlignedArena();
  AlignedArena(const AlignedArena&) = delete;
  AlignedArena& operator=(const AlignedArena&) = delete;

  uint64_t slot_bytes() const { return slot_bytes_; }
  size_t max_slots() const { return max_slots_; }
  // A free slot, or nullptr when none is admissible for this purpose now.
  uint8_t* try_take(Purpose p);
  // Waits for a slot (demand never waits on prefetch's share).
  uint8_t* take(Purpose p);
  void release(uint8_t* slot);
  size_t in_use() const;
  size_t allocated() const;

 private:
  bool admissible(Purpose p) const;  // with mu_ held
  uint8_t* take_locked();
  const uint64_t slot_bytes_;
  const size_t max_slots_, demand_reserve_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t*> chunks_;  // allocations; slots are carved from them
  std::vector<uint8_t*> all_, free_;
};

}  // namespace deltafin::io
