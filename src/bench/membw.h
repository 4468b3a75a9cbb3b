// Measured memory read bandwidth: the yardstick for memory-bound kernels.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace deltafin::bench {

struct ReadBandwidth {
  double bytes_per_s = 0;  // best of `reps`
  size_t bytes = 0;        // buffer size read per rep
  int reps = 0;
  double cpu_share = 0;   // best rep's process CPU time / (wall x threads)
  uint64_t checksum = 0;  // XOR of the buffer, so the reads cannot be elided
};

// Streams a `bytes`-sized buffer (make it much larger than the last-level
// cache) with every pool thread reading its own contiguous slice, `reps`
// times; reports the best rep.
ReadBandwidth measure_read_bandwidth(size_t bytes, ThreadPool& pool, int reps);

// Process CPU time in seconds (all threads).
double process_cpu_seconds();

}  // namespace deltafin::bench
