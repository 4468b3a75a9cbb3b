#include "io/aligned_arena.h"

#include <algorithm>

#include "io/io_buffer.h"

namespace deltafin::io {

const char* purpose_name(Purpose p) { return p == Purpose::Demand ? "demand" : "prefetch"; }

AlignedArena::AlignedArena(uint64_t slot_bytes, size_t max_slots, size_t demand_reserve)
    : slot_bytes_((slot_bytes + 4095) / 4096 * 4096), max_slots_(max_slots), demand_reserve_(demand_reserve) {}

AlignedArena::~AlignedArena() {
  for (uint8_t* p : chunks_) free_io_buffer(p);
}

bool AlignedArena::admissible(Purpose p) const {
  const size_t available = free_.size() + (max_slots_ - all_.size());
  if (available == 0) return false;
  return p == Purpose::Demand || available > demand_reserve_;
}

uint8_t* AlignedArena::take_locked() {
  if (!free_.empty()) {
    uint8_t* p = free_.back();
    free_.pop_back();
    return p;
  }
  // A chunk of up to 8 slots (at least ~16 MiB when slots are small), so huge
  // pages cover the slots without rounding each one up to 2 MiB.
  const size_t want = std::max<size_t>(8, size_t((16 << 20) / slot_bytes_));
  const size_t n = std::min(want, max_slots_ - all_.size());
  uint8_t* mem = alloc_io_buffer(n * slot_bytes_);
  if (!mem) return nullptr;
  chunks_.push_back(mem);
  for (size_t i = 0; i < n; ++i) all_.push_back(mem + i * slot_bytes_);
  // Hand out the first; the rest are free (pushed so the lowest address goes next).
  for (size_t i = n; i-- > 1;) free_.push_back(mem + i * slot_bytes_);
  return mem;
}

uint8_t* AlignedArena::try_take(Purpose p) {
  std::lock_guard<std::mutex> lock(mu_);
  return admissible(p) ? take_locked() : nullptr;
}

uint8_t* AlignedArena::take(Purpose p) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return admissible(p); });
  return take_locked();
}

void AlignedArena::release(uint8_t* slot) {
  if (!slot) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  cv_.notify_all();
}

size_t AlignedArena::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size() - free_.size();
}

size_t AlignedArena::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size();
}

}  // namespace deltafin::io
