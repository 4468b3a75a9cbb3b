// The engine's ExpertSource over a store: begin(layer, ids) issues every
// expert read of the layer at once through the read engine (demand purpose);
// wait(i) blocks for one of them, checks it (checksum in the engine, MXFP4
// scale bytes here) and hands out views into arena buffers that stay valid
// until the next begin(). With a RAM tier (ram_tier.h) a resident expert
// needs no read at all, and a miss the tier admits is read straight into
// its tier slot, published there once its checks passed (a claimed prefetch
// guess, already read into the arena, is copied into its slot instead).
#pragma once
#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/aligned_arena.h"
#include "io/read_engine.h"
#include "model/expert_layout.h"
#include "model/expert_source.h"
#include "store/fetched_log.h"
#include "store/manifest.h"
#include "store/ram_tier.h"
#include "store/remote_experts.h"

namespace deltafin {

struct HeatFile;

struct StoreReadOptions {
  io::EngineOptions engine;
  uint64_t arena_bytes = 8ull << 30;  // bound on expert buffers (at least one expert's span is always allowed)
  uint64_t ram_tier_bytes = 0;        // RAM tier of verified experts (0: none)
  uint64_t ram_tier_age_every = 0;    // TierPolicy's ageing period in requests (0: its default)
  // Warm start: the tier's scores begin at each expert's mean requests per
  // run in this heat file (heat_file.h); nullptr: all start at 0.
  const HeatFile* tier_seed = nullptr;
  std::string store_dir;  // a streamed store keeps its record of local experts there
  // A streamed store (Manifest::stream): where experts that are not local
  // come from (nullptr: offline, a missing expert is an error naming it).
  std::shared_ptr<RemoteExperts> remote;
};

class StoreExpertSource : public ExpertSource {
 public:
  // Buffers of the read arena for `arena_bytes`: at least one, at most one per
  // expert of a layer (a layer never needs more at once).
  static size_t arena_slots(const Manifest& m, uint64_t arena_bytes) {
    return size_t(std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(m.num_experts), arena_bytes / m.span_bytes)));
  }
  // Opens every pack file (a missing drive root or a pack of the wrong size
  // becomes a warning when all its experts have another copy, else an error
  // naming the expert, drive and file).
  static Result<std::unique_ptr<StoreExpertSource>> open(const Manifest& m, const ModelConfig& cfg,
                                                         const StoreReadOptions& opts,
                                                         std::vector<std::string>* warnings);
  ~StoreExpertSource() override;
  Status begin(int layer, std::span<const int> experts, std::span<ExpertWeights> out) override;
  Status wait(size_t i) override;
  // A tier hit, or a read whose bytes are in (a claimed guess, usually).
  bool ready(size_t i) const override;
  ExpertSourceStats stats() const override;
  size_t max_batch() const override { return arena_->max_slots(); }
  // Speculative reads under the engine's prefetch budget, into arena slots
  // that demand's reserve never lends out; begin() claims the ones it asks
  // for (promoting those still queued to demand) and cancels the rest. A
  // guess never takes a tier slot: a claimed one is admitted as a miss.
  void prefetch(int layer, std::span<const int> experts) override;

  io::ReadEngine& engine() { return *engine_; }
  const io::ReadEngine& engine() const { return *engine_; }
  const Manifest& manifest() const { return man_; }
  // Pack files of a drive that opened fine (for the probe).
  std::vector<std::string> drive_files(int drive) const;
  // The read request for one expert (replicas, checksum, label); dest unset.
  Result<io::ReadRequest> request(int layer, int expert) const;
  // The RAM tier, nullptr when off.
  const RamTier* tier() const { return tier_.get(); }
  // Requests of each expert (moe_index * experts + e) by begin() so far: the heat file's counts for this run.
  const std::vector<uint64_t>& uses() const { return uses_; }
  // A streamed store's record of local experts (nullptr: a complete store).
  const FetchedLog* fetched() const { return fetched_.get(); }
  // The expert's bytes are in its pack (always, in a complete store).
  bool local(int moe_index, int expert) const;

 private:
  StoreExpertSource() = default;
  Manifest man_;
  ModelConfig cfg_;
  std::unique_ptr<io::ReadEngine> engine_;
  std::unique_ptr<io::AlignedArena> arena_;
  std::vector<std::vector<int>> file_ids_;  // [drive][pack] -> engine file id, -1 if unusable
  std::unique_ptr<RamTier> tier_;
  std::vector<uint64_t> uses_;
  std::unique_ptr<FetchedLog> fetched_;     // streamed stores only
  std::shared_ptr<RemoteExperts> remote_;  // streamed stores only; may be null (offline)
  // Fetches the experts of `layer` among `experts` that are not local.
  Status fetch_missing(int layer, std::span<const int> experts);
  // Drops the last begin()'s reads: cancels those still queued, waits for
  // the kernel to let go of their buffers, returns the buffers to the arena.
  void settle();

  struct Speculative {
    int layer = -1, expert = -1;
    uint8_t* slot = nullptr;  // an arena buffer
    io::ReadHandle handle;
  };
  std::vector<Speculative> spec_;     // issued by prefetch(), not yet claimed
  std::vector<Speculative> dropped_;  // cancelled; the slot returns once the read is over
  void reap_dropped(bool block);
  // Cancels the guesses no begin() claimed (a claimed one has no slot left).
  void drop_unclaimed();

  std::vector<uint8_t*> held_;
  // Where each expert of the last begin() is held.
  enum class Held : char {
    kArena,        // an arena buffer
    kTierFill,     // a tier slot its read fills
    kTierHit,      // a resident tier slot (no read)
    kArenaToTier,  // a claimed guess in an arena buffer; settle() swaps it with the tier slot reserved_slot_[i] (wait() copies where they differ in size)
  };
  std::vector<Held> held_as_;
  std::vector<char> verified_;  // a read passed its checks (fills are published only then)
  std::vector<uint8_t*> reserved_slot_;  // kArenaToTier: the tier slot the policy reserved for it
  bool adopt_ = false;  // tier slots and arena buffers are the same size: claimed guesses trade places, no copy
  std::vector<int> keys_;  // the last begin()'s tier keys, one per request (-1: not in the store)
  void tier_snapshot();  // copies the tier's counters into stats_
  ExpertLayout layout_;  // record offsets inside a span
  // The reads of the last begin(): one handle per expert, in order.
  int layer_ = -1;
  std::vector<int> experts_;
  std::vector<io::ReadHandle> handles_;
  std::vector<char> waited_;  // wait(i) has returned (only its caller touches its slot)
  std::span<ExpertWeights> out_;
  std::chrono::steady_clock::time_point begun_;
  mutable std::mutex mu_;  // guards stats_ and ready_ (never held across I/O)
  size_t ready_ = 0;
  std::chrono::steady_clock::time_point last_bytes_in_;  // of this layer's reads so far (guarded by mu_)
  ExpertSourceStats stats_;
};

}  // namespace deltafin
