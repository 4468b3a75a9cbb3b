// The read engine's scheduling decisions, pure and clock-free, so that the
// engine (real drives, real clock) and the drive simulator (src/sim, simulated
// clock) run the very same code: which replica takes a read, how a large read
// is split across replicas, which queued read a drive admits next, and how a
// drive's rate estimate learns from completed reads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "io/aligned_arena.h"

namespace deltafin::io {

// Seconds until a drive would finish a read of `span` bytes queued behind
// `inflight_bytes`, at `rate` bytes/s (rates below 1 B/s count as 1).
double finish_estimate(uint64_t inflight_bytes, uint64_t span, double rate);

struct ReplicaLoad {
  uint64_t inflight_bytes = 0;  // bytes in flight on the replica's drive
  double rate = 0;              // that drive's rate estimate, bytes/s
};

// Index of the replica whose drive would finish a `span`-byte read first (the
// first on ties); -1 if `loads` is empty.
int pick_replica(std::span<const ReplicaLoad> loads, uint64_t span);

// A read is split across replicas when at least two are usable and it is at
// least `split_min` bytes long.
bool should_split(size_t usable_replicas, uint64_t span, uint64_t split_min);

struct SplitPiece {
  size_t replica = 0;  // index into the loads given to split_by_eta
  uint64_t begin = 0, length = 0;
};

// Splits [0, span) into consecutive pieces, one per replica in order, so that
// every replica's drive would finish at the same time given its bytes in
// flight and rate (water-filling: a drive already busier than that time gets
// nothing), cut at multiples of 4096; the last replica with a piece takes the
// remainder. Replicas whose share rounds to nothing get no piece. With nothing
// in flight the pieces are in proportion to the rates.
std::vector<SplitPiece> split_by_eta(uint64_t span, std::span<const ReplicaLoad> loads);

// One read of a batch submitted together (a layer's experts).
struct BatchRead {
  std::vector<int> drives;  // the drive of each usable replica: indices into the batch's drive loads
  uint64_t span = 0;
};

// Which replica (index into drives) each read of a batch takes, -1 for a read
// with none. First greedily in order, each read on the replica whose drive
// would finish first given the loads plus the reads already assigned (what
// per-read pick_replica does); then, while the busiest drive can hand a read
// down a chain of replicas (drive A gives a read to B, B one to C, ...) so
// that the drives' finish times sorted from the latest get lexicographically
// smaller, it does. So the batch's estimated finish (the busiest drive) is
// never later than the greedy's.
std::vector<int> assign_replicas(std::span<const BatchRead> reads, std::span<const ReplicaLoad> drives);

// How a batch is read: per read, its pieces (replica = index into its drives;
// one piece covering the span for a read that is not split; none for a read
// without drives). Split reads (should_split) are cut first, in order, each by
// split_by_eta seeing the loads plus the pieces before it; then the other
// reads' replicas come from assign_replicas on top of all that.
std::vector<std::vector<SplitPiece>> plan_batch(std::span<const BatchRead> reads, std::span<const ReplicaLoad> drives,
                                                uint64_t split_min);

// A drive's admission state.
struct DriveSlots {
  int depth = 1;           // reads in flight at most
  int prefetch_depth = 8;  // of which prefetches at most (and never all of depth when depth > 1)
  int inflight_demand = 0, inflight_prefetch = 0;
  bool demand_queued = false, prefetch_queued = false;
};

// Which queue the drive starts a read from now, if any: demand first;
// prefetch only below its own budget, which always leaves a slot for demand.
std::optional<Purpose> admit_next(const DriveSlots& s);

// Reads in flight per drive: the ring's depth for io_uring, else bounded by
// the pread threads.
int drive_depth(bool uring, int queue_depth, int pread_threads);

// A drive's read rate, learned from completed reads: bytes over busy time
// (time with at least one read in flight), in windows of at least 20 ms and
// 4 MiB, smoothed (EWMA 0.65 old / 0.35 new).
struct RateEstimator {
  double rate = 1e9;  // bytes/s
  uint64_t window_bytes0 = 0;
  double window_busy0 = 0;
  // busy_seconds and total_bytes: the drive's cumulative counters now.
  void observe(double busy_seconds, uint64_t total_bytes);
};

}  // namespace deltafin::io
