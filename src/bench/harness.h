// The benchmark harness behind `deltafin bench`: named arms (each a set of
// `run` flags), repetitions in balanced interleaved order (ABBA...), an exact
// token oracle, and the per-arm summary with the machine's own limits (disk
// probe, memory-bandwidth probe) measured in the same invocation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/run_record.h"
#include "core/result.h"

namespace deltafin::bench {

struct Arm {
  std::string name;
  std::vector<std::string> flags;  // appended to every `run` of this arm
};

// "NAME=FLAGS" (FLAGS split like a shell would: whitespace, '...' and "..." quoting, \ escapes).
Result<Arm> parse_arm(const std::string& spec);
Result<std::vector<std::string>> split_flags(const std::string& text);

// The arm index of every measured run, in order: repetition r runs the arms
// forwards when r is even and backwards when it is odd (A B | B A | A B ...),
// so with an even number of repetitions every arm has the same mean position
// and drift over the session cancels out between arms.
std::vector<int> balanced_order(int arms, int reps);

// The token oracle: the ids every run must reproduce (the first run of the first arm).
struct OracleVerdict {
  bool match = true;
  size_t first_difference = 0;  // index of the first differing id (or the shorter length)
};
OracleVerdict check_oracle(const std::vector<int32_t>& expected, const std::vector<int32_t>& got);

struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spread(std::vector<double> v);  // all zero when empty

struct DiskProbe {
  std::string root, mode;
  double mb_s = 0;
};

// The machine's limits, measured around the runs.
struct Limits {
  std::vector<DiskProbe> disk_before, disk_after;  // per drive root
  double membw_gb_s = 0;
  double disk_mb_s() const;  // all drives together: mean of before and after
};

struct ArmSummary {
  std::string name;
  bool rejected = false;
  std::string rejection;  // why: which run, which token
  int runs = 0;
  bool cold = false;
  std::string io_mode;
  Spread ttft_s, prefill_tok_s, decode_tok_s;
  double decode_read_bytes_per_token = 0;  // median over runs
  double prefill_read_amplification = 0;   // median over runs
  double read_wait_per_token_s = 0;        // median over runs: decode time the compute waited for experts, per token
  double read_time_per_token_s = 0;        // median over runs: decode expert-read wall time per token
  double tokens_per_pass = 0;              // median over runs: decode tokens per target pass (1 without drafting)
  double cold_bytes_per_token = 0;         // the bytes the roofline charges per token
  // (cold bytes per token / probed disk rate) / time per decode token;
  // 1.0 = decoding at the disk's limit. 0 when there is no disk rate. With a
  // probe after every run (bench's default), the median over runs of each
  // run's ratio against its own probe, so drift of the drive between runs
  // cancels; otherwise against the session's before/after probes.
  double roofline = 0;
  double roofline_session = 0;  // always against the session's before/after probes
  double run_probe_mb_s = 0;    // median of the per-run probes (0: none)
  double engine_mb_s = 0;       // median over runs of the read engine's achieved rate
  double engine_vs_probe = 0;   // median over runs of engine_mb_s / that run's probe (0: no per-run probes)
};

ArmSummary summarize_arm(const std::string& name, const std::vector<RunRecord>& runs, const Limits& limits);

// The table `bench` prints and writes to summary.txt.
std::string format_summary(const std::vector<ArmSummary>& arms, const Limits& limits);

}  // namespace deltafin::bench
