// `deltafin bench-kernels`: the machine's memory read bandwidth and each
// matrix kernel's effective weight-bytes/s at T = 1 and T = 16, in one run.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/kernel_bench.h"
#include "cli/command.h"

namespace deltafin::cli {

namespace {

struct BenchKernelsArgs {
  int threads = 0;  // 0: every hardware thread
  size_t mib = 256;
  int reps = 5;
  bool json = false;
  size_t expert_latent = 3584, expert_inter = 3072;
};

// Rates divided by the cpu share: what the run would reach if it had its
// cores to itself, assuming the memory system was not the shared part. An
// estimate for a busy machine, printed next to the raw numbers, never instead.
double cpu_ratio(const bench::KernelBenchReport& rep, const bench::KernelBenchRow& r) {
  return (r.weight_bytes_per_s / r.cpu_share) / (rep.membw.bytes_per_s / rep.membw.cpu_share);
}

int run(const BenchKernelsArgs& a) {
  bench::KernelBenchOptions opt;
  opt.threads = a.threads > 0 ? a.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  opt.weight_mib = a.mib;
  opt.reps = a.reps;
  opt.expert_latent = a.expert_latent;
  opt.expert_inter = a.expert_inter;
  auto rep = bench::run_kernel_bench(opt);
  if (!rep.ok()) return fail(rep.message());
  const double gb = 1e9;
  if (a.json) {
    nlohmann::json j;
    j["target"] = rep->target;
    j["threads"] = rep->threads;
    j["membw_read_bytes_per_s"] = rep->membw.bytes_per_s;
    j["membw_buffer_bytes"] = rep->membw.bytes;
    j["membw_cpu_share"] = rep->membw.cpu_share;
    j["fma_peak_flops_per_s"] = rep->fma.flops_per_s;
    j["fma_peak_cpu_share"] = rep->fma.cpu_share;
    for (const auto* list : {&rep->rows, &rep->experts})
      for (const auto& r : *list)
      j[list == &rep->rows ? "kernels" : "experts"].push_back({{"kernel", r.kernel},
                              {"T", r.T},
                              {"rows", r.rows},
                              {"cols", r.cols},
                              {"weight_bytes", r.weight_bytes},
                              {"seconds", r.seconds},
                              {"weight_bytes_per_s", r.weight_bytes_per_s},
                              {"ratio_to_membw", r.ratio_to_membw},
                              {"gflops", r.gflops},
                              {"ratio_to_fma_peak", r.ratio_to_fma_peak},
                              {"cpu_share", r.cpu_share},
                              {"cpu_normalised_bytes_per_s", r.weight_bytes_per_s / r.cpu_share},
                              {"cpu_normalised_ratio", cpu_ratio(*rep, r)}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("target %s, %d threads\n", rep->target.c_str(), rep->threads);
  std::printf("memory read bandwidth: %.2f GB/s (best of %d reads of %.0f MiB, spread over the run; cpu share %.0f%%)\n",
              rep->membw.bytes_per_s / gb, rep->membw.reps, double(rep->membw.bytes) / (1 << 20),
              100 * rep->membw.cpu_share);
  std::printf("fp32 FMA peak: %.1f GFLOP/s (%d threads, independent vector FMA chains; cpu share %.0f%%)\n",
              rep->fma.flops_per_s / gb, rep->fma.threads, 100 * rep->fma.cpu_share);
  std::printf("%-6s %3s %7s %6s %9s %9s %11s %7s %8s %7s %9s | %11s %7s\n", "kernel", "T", "rows", "cols", "weightMiB",
              "ms", "weight GB/s", "of bw", "GFLOP/s", "of FMA", "cpu share", "GB/s/share", "of bw");
  for (const auto* list : {&rep->rows, &rep->experts})
    for (const auto& r : *list)
      std::printf("%-6s %3zu %7zu %6zu %9.1f %9.2f %11.2f %6.1f%% %8.1f %6.1f%% %8.0f%% | %11.2f %6.1f%%\n",
                  r.kernel.c_str(), r.T, r.rows, r.cols, double(r.weight_bytes) / (1 << 20), r.seconds * 1e3,
                  r.weight_bytes_per_s / gb, 100 * r.ratio_to_membw, r.gflops, 100 * r.ratio_to_fma_peak,
                  100 * r.cpu_share, r.weight_bytes_per_s / r.cpu_share / gb, 100 * cpu_ratio(*rep, r));
  std::printf("expert: one routed expert's W1, W3 [rows=inter, cols=latent] and W2 [latent, inter] on T rows,\n"
              "each thread taking whole experts (the MoE's decode and prefill split), experts streamed from DRAM.\n");
  std::printf("cpu share: CPU time the process got during the best rep / (wall time x threads). Below ~90%%,\n"
              "other processes shared the cores and the raw rates understate the kernels; the columns after\n"
              "'|' divide each rate (and the bandwidth) by its cpu share: an estimate, not a measurement.\n");
  return 0;
}

void setup(CLI::App& root) {
  auto* cmd = root.add_subcommand("bench-kernels",
                                  "Measure memory read bandwidth and the matrix kernels' weight-bytes/s (T=1, T=16)");
  set_example(cmd, "deltafin bench-kernels --threads 2 --mib 64");
  static BenchKernelsArgs args;
  cmd->add_option("--threads", args.threads, "threads (default: all hardware threads)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--mib", args.mib, "weight MiB per kernel and bandwidth buffer; keep it well above the LLC")
      ->check(CLI::Range(size_t(1), size_t(1) << 20));
  cmd->add_option("--reps", args.reps, "timed repetitions (best is reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--expert-latent", args.expert_latent, "routed-expert latent width (default: K3's 3584)");
  cmd->add_option("--expert-inter", args.expert_inter, "routed-expert intermediate width (default: K3's 3072)");
  cmd->add_flag("--json", args.json, "print JSON instead of a table");
  cmd->callback([] { set_exit_code(run(args)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
