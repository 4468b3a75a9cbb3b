// The machine's fp32 FMA peak, measured: independent vector FMA chains that
// never touch memory, on the widest target the kernels dispatch to. Compute
// figures (bench-kernels, the prefill GEMM) are stated as a share of it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace deltafin::kernels {

// Runs `iters` rounds of kFmaChains independent vector FMAs on this thread;
// returns the floating-point operations done (2 per lane per FMA). The
// result of the chains is folded into *sink so nothing is optimised away.
uint64_t fma_burst(size_t iters, float* sink);

}  // namespace deltafin::kernels
