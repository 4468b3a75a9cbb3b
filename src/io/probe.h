// Raw read-rate probe: random `block`-sized reads at queue depth `qd` from a
// set of files on one drive, O_DIRECT (buffered where refused), io_uring
// (pread threads where unavailable). Used by prepare (to place experts in
// proportion to drive rates) and by `run --stats` (the yardstick for the
// engine's achieved rate). Also the host facts `doctor` reports.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin::io {

struct ProbeResult {
  double mb_s = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  bool direct = false;
  bool uring = false;
  std::string mode() const;
};

// Reads until `max_bytes` or `max_seconds`, whichever comes first. Offsets are
// multiples of `block` inside the files (each file at least one block long).
Result<ProbeResult> probe_files(const std::vector<std::string>& files, uint64_t block, int qd, uint64_t max_bytes,
                                double max_seconds, uint64_t seed = 1);

// Writes a temporary file of `bytes` under `dir`, syncs it, probes it, removes it.
Result<ProbeResult> probe_directory(const std::string& dir, uint64_t bytes, uint64_t block, int qd, double max_seconds);

// Host facts.
bool io_uring_available();
// True if `dir` accepts an O_DIRECT open of a file created in it (the file is removed).
Result<bool> direct_io_supported(const std::string& dir);

}  // namespace deltafin::io
