// What one `deltafin run --stats-json FILE` measured, in a form `deltafin
// bench` reads back: the generated ids (for the token oracle), the phase
// times, and the expert bytes read in each phase. One record per process, so
// every benchmark run starts from a fresh process (no state carried between
// runs but the page cache, which store runs bypass with O_DIRECT).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin::bench {

struct RunRecord {
  std::string source;   // "store" or "model"
  std::string io_mode;  // store: the drives' modes ("io_uring+O_DIRECT", ...); model: "mmap"
  bool cold = false;    // expert bytes came from the drives, not the page cache (O_DIRECT on every drive)
  int threads = 0, prefill_chunk = 0;
  int64_t prompt_tokens = 0;
  std::vector<int32_t> ids;  // generated token ids, in order
  double load_s = 0;         // opening the model (spine read, store opened)
  double ttft_s = 0;         // from the start of generation to the first token
  double prefill_s = 0;      // the prompt's forward blocks
  std::vector<double> step_s;  // each decode step: forward of the newest token + argmax
  // Time the compute waited inside ExpertSource::acquire, by phase (the
  // measured expert-read time that `simulate-drives` predicts).
  double prefill_expert_wait_s = 0, decode_expert_wait_s = 0;
  // Wall time the expert reads took, by phase: per MoE layer, from the first
  // request of its union to the last expert ready, summed (0 for --model).
  double prefill_read_s = 0, decode_read_s = 0;
  // Expert traffic. "read" is what the source fetched (store: bytes read from
  // the drives, whole 4 KiB-aligned spans; model: expert bytes touched in the
  // mapping). unit_bytes is one expert in the same unit.
  uint64_t unit_bytes = 0;
  uint64_t prefill_read_bytes = 0, decode_read_bytes = 0;
  uint64_t prefill_distinct_experts = 0;  // distinct (layer, expert) pairs routed by the prompt's rows
  uint64_t cold_bytes_per_token = 0;      // top_k x MoE layers x unit_bytes: one token's experts, all cold
  // Store runs: each drive's bytes over its busy time (at least one read in
  // flight), summed over drives, MB/s: the read engine's achieved rate.
  double engine_mb_s = 0;
  // Speculative next-layer reads (run --prefetch): issued, and used by the layer they guessed.
  uint64_t prefetch_issued = 0, prefetch_hits = 0;
  // RAM tier (run --ram-experts-gb): its slots, and expert requests served from RAM / read from drives.
  uint64_t ram_tier_slots = 0, ram_hits = 0, ram_misses = 0;
  // Drafting (run --draft): what drafted, tokens after the first and the
  // target passes that decided them (equal without drafting), draft ids
  // proposed and accepted, and whether the economics switched it off.
  std::string draft;
  int64_t decode_tokens = 0, target_passes = 0, draft_proposed = 0, draft_accepted = 0;
  bool draft_switched_off = false;
  double tokens_per_pass() const { return target_passes > 0 ? double(decode_tokens) / double(target_passes) : 0.0; }
  // Filled in by `bench`, not by `run`: the drives' raw rate (MB/s, all
  // drives together) probed right after this run; 0 when not probed.
  double disk_probe_mb_s = 0;

  // Bytes read during prefill / bytes of the distinct experts the prompt routed (1.0: each read once).
  double prefill_read_amplification() const;
  double decode_tokens_per_s() const;      // decode steps / their summed time
  double decode_read_bytes_per_token() const;
  double decode_seconds_per_token() const;  // 1 / decode_tokens_per_s()

  std::string to_json() const;
  static Result<RunRecord> from_json(const std::string& text, const std::string& what);
};

}  // namespace deltafin::bench
