// The kernel benchmark behind `deltafin bench-kernels`: memory read bandwidth
// and each kernel's effective weight-bytes/s on a matrix larger than the LLC.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "bench/fma_peak.h"
#include "bench/membw.h"
#include "core/result.h"

namespace deltafin::bench {

struct KernelBenchOptions {
  int threads = 1;
  size_t weight_mib = 256;  // weight bytes per kernel (and bandwidth buffer)
  size_t cols = 7168;       // input width (a K3-like hidden size)
  int reps = 5;
  std::vector<size_t> Ts = {1, 16};
  // Routed-expert products (W1, W3: [inter, latent]; W2: [latent, inter]) at
  // these rows per expert, each thread taking whole experts as the MoE does.
  size_t expert_latent = 3584, expert_inter = 3072;  // K3's expert shape
  std::vector<size_t> expert_Ts = {1, 8, 16};
};

struct KernelBenchRow {
  std::string kernel;  // "bf16", "i8" (row-int8), "mxfp4", "f32"
  size_t T = 0, rows = 0, cols = 0;
  size_t weight_bytes = 0;  // bytes of W (MXFP4: blocks + scales)
  double seconds = 0;       // best rep
  double weight_bytes_per_s = 0;
  double ratio_to_membw = 0;
  double gflops = 0;  // 2 * rows * cols * T / seconds
  // CPU time the process got during the best rep over wall time x threads:
  // well below 1 means other processes shared the cores and the rate is low.
  double cpu_share = 0;
  double ratio_to_fma_peak = 0;  // gflops / the measured FMA peak
};

struct KernelBenchReport {
  std::string target;  // Highway target the kernels dispatched to
  int threads = 0;
  ReadBandwidth membw;  // best over a first measurement and one after each kernel
  FmaPeak fma;          // best over a first measurement and one after each kernel
  std::vector<KernelBenchRow> rows;
  // kernel "expert": one routed expert's three products per row set.
  std::vector<KernelBenchRow> experts;
};

Result<KernelBenchReport> run_kernel_bench(const KernelBenchOptions& opt);

}  // namespace deltafin::bench
