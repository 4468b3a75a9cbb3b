// Measured fp32 FMA peak: the yardstick for compute-bound kernels (prefill).
#pragma once
#include "core/thread_pool.h"

namespace deltafin::bench {

struct FmaPeak {
  double flops_per_s = 0;  // best of `reps`, all pool threads together
  int threads = 0;
  double cpu_share = 0;    // best rep's process CPU time / (wall x threads)
};

// Every pool thread runs independent vector FMA chains for about `seconds`
// per rep (no memory traffic); reports the best rep.
FmaPeak measure_fma_peak(ThreadPool& pool, int reps, double seconds = 0.05);

}  // namespace deltafin::bench
