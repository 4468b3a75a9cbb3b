#include "store/ram_tier.h"

#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/io_buffer.h"

namespace deltafin {

Result<std::unique_ptr<RamTier>> RamTier::create(uint64_t budget_bytes, uint64_t span_bytes, size_t keys,
                                                 uint64_t age_every, size_t requests_per_token) {
  if (span_bytes == 0) return error("RAM tier: span of 0 bytes");
  const uint64_t n = std::min<uint64_t>(budget_bytes / span_bytes, keys);
  if (n == 0)
    return error("RAM tier: {} bytes hold no expert span of {} bytes", budget_bytes, span_bytes);
  auto t = std::unique_ptr<RamTier>(new RamTier(size_t(n), span_bytes, keys, age_every, tier_window(size_t(n), requests_per_token)));
  // Rounded up to whole huge pages; NORESERVE: pages exist once touched.
  t->mapped_ = (n * span_bytes + io::kHugePage - 1) / io::kHugePage * io::kHugePage;
  void* p = ::mmap(nullptr, t->mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return error("RAM tier: cannot map {} bytes: {}", t->mapped_, std::strerror(errno));
  t->base_ = static_cast<uint8_t*>(p);
  t->mem_.resize(size_t(n));
  t->index_.reserve(size_t(n));
  for (size_t i = 0; i < size_t(n); ++i) t->mem_[i] = t->base_ + i * span_bytes, t->index_[t->mem_[i]] = int(i);
  (void)::madvise(p, t->mapped_, MADV_HUGEPAGE);  // advisory: fewer scatter-gather segments per O_DIRECT read
  // Fault every page in now, at load: a read into a page not yet mapped pays
  // for zeroing it, and those faults made the first fills (the prompt's)
  // slower than reads into the warm arena (docs/guide/drives-and-ram-tier.md).
  const auto t0 = std::chrono::steady_clock::now();
#ifdef MADV_POPULATE_WRITE
  if (::madvise(p, t->mapped_, MADV_POPULATE_WRITE) != 0)
#endif
    for (uint64_t off = 0; off < t->mapped_; off += 4096) t->base_[off] = 0;
  t->populate_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#ifdef MLOCK_ONFAULT
  if (::mlock2(p, t->mapped_, MLOCK_ONFAULT) == 0) {
    t->locked_ = true;
    t->lock_note_ = "locked";
  } else {
    t->lock_note_ = fmt::format("not locked ({}; raise `ulimit -l` to keep the tier out of swap)", std::strerror(errno));
  }
#else
  t->lock_note_ = "not locked (no mlock2 here)";
#endif
  return t;
}

RamTier::~RamTier() {
  if (base_) ::munmap(base_, mapped_);
}

const uint8_t* RamTier::lookup(int key) {
  policy_.use(key);
  const int s = policy_.slot_of(key);
  if (s < 0) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  if (!pinned_[size_t(s)]) pinned_[size_t(s)] = 1, pinned_list_.push_back(s);
  return slot_ptr(s);
}

uint8_t* RamTier::reserve(int key) {
  int evicted = -1;
  const int s = policy_.admit(key, [&](int slot) { return pinned_[size_t(slot)] != 0; }, &evicted);
  if (s < 0) {
    ++stats_.bypassed;
    return nullptr;
  }
  if (evicted >= 0) ++stats_.evictions;
  pinned_[size_t(s)] = 1;  // reserved: never a victim while its read is in flight
  pinned_list_.push_back(s);
  return slot_ptr(s);
}

void RamTier::publish(uint8_t* slot, int key) {
  policy_.publish(slot_index(slot), key);
  ++stats_.fills;
}

void RamTier::abandon(uint8_t* slot) {
  policy_.abandon(slot_index(slot));
  ++stats_.abandoned;
}

uint8_t* RamTier::adopt(uint8_t* reserved, uint8_t* filled) {
  const int s = slot_index(reserved);
#ifdef MLOCK_ONFAULT
  if (locked_) (void)::mlock2(filled, span_, MLOCK_ONFAULT);  // best effort: it stays locked once returned
#endif
  index_.erase(reserved);
  index_[filled] = s;
  mem_[size_t(s)] = filled;
  ++stats_.adopted;
  return reserved;
}

void RamTier::unpin_all() {
  for (int s : pinned_list_) pinned_[size_t(s)] = 0;
  pinned_list_.clear();
}

Result<AutoTierSize> auto_tier_bytes(uint64_t spine_bytes, uint64_t arena_bytes, uint64_t session_bytes) {
  DF_ASSIGN(MemoryLimit mem, memory_limit());
  return auto_tier_bytes(mem, spine_bytes, arena_bytes, session_bytes);
}

AutoTierSize auto_tier_bytes(const MemoryLimit& mem, uint64_t spine_bytes, uint64_t arena_bytes,
                             uint64_t session_bytes) {
  const uint64_t margin = std::max<uint64_t>(2ull << 30, mem.total / 20);
  const uint64_t used = spine_bytes + arena_bytes + session_bytes + margin;
  AutoTierSize a;
  a.bytes = mem.available > used ? mem.available - used : 0;
  auto gb = [](uint64_t b) { return double(b) / 1e9; };
  const std::string from =
      mem.cgroup_binds ? fmt::format("cgroup memory limit {:.2f} GB - used {:.2f}", gb(mem.cgroup_limit), gb(mem.cgroup_used))
                       : std::string("MemAvailable");
  a.line = fmt::format("ram tier auto: {} {:.2f} GB - spine {:.2f} - read arena {:.2f} - session state {:.2f} - margin "
                       "{:.2f} = {:.2f} GB",
                       from, gb(mem.available), gb(spine_bytes), gb(arena_bytes), gb(session_bytes), gb(margin),
                       gb(a.bytes));
  return a;
}

}  // namespace deltafin
