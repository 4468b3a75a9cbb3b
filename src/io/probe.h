// Raw read-rate probe: random `block`-sized reads at queue depth `qd` from a
// set of files on one drive, O_DIRECT (buffered where refused), io_uring
// (pread threads where unavailable). Used by prepare (to place experts in
// proportion to drive rates) and by `run --stats` (the yardstick for the
// engine's achieved rate). Also the host facts `doctor` reports.
//
// The reads land in turn in the slots of a pre-faulted region of at least
// kProbeFootprint bytes, as the engine's land in its arena and RAM tier: on a
// virtual machine a probe that reused qd buffers (8 MiB here) stayed in the
// host's cache and read 2.7-3.0 GB/s where 32 MiB or more read 2.0-2.1 GB/s
// (docs/design/store-and-read-engine.md, "The probe's destination").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin::io {

// The least memory the probe's reads rotate through.
inline constexpr uint64_t kProbeFootprint = uint64_t(64) << 20;

struct ProbeResult {
  double mb_s = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  bool direct = false;
  bool uring = false;
  uint64_t footprint = 0;  // bytes the reads rotated through
  std::string mode() const;
};

// Reads until `max_bytes` or `max_seconds`, whichever comes first. Offsets are
// multiples of `block` inside the files (each file at least one block long).
// The reads rotate through max(footprint, qd x block) bytes.
Result<ProbeResult> probe_files(const std::vector<std::string>& files, uint64_t block, int qd, uint64_t max_bytes,
                                double max_seconds, uint64_t seed = 1, uint64_t footprint = kProbeFootprint);

// Writes a temporary file of `bytes` under `dir`, syncs it, probes it, removes it.
Result<ProbeResult> probe_directory(const std::string& dir, uint64_t bytes, uint64_t block, int qd, double max_seconds);

// Host facts.
bool io_uring_available();
// True if `dir` accepts an O_DIRECT open of a file created in it (the file is removed).
Result<bool> direct_io_supported(const std::string& dir);

}  // namespace deltafin::io
