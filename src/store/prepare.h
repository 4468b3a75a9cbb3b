// `deltafin prepare`: one pass over a published checkpoint that validates it
// and writes a store: spine pack, expert packs on the drive roots (with
// replicas of hot experts), manifest. Atomic and resumable: every output file
// is written under a temp name and renamed, then recorded in STORE/.prepare;
// a rerun with the same options skips recorded work; the manifest is written
// last, so a store is complete or refused.
#pragma once
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin {

struct PrepareOptions {
  std::string model_dir, out_dir;
  std::vector<std::string> drives;  // "DIR" (rate probed) or "DIR:RATE" (MB/s)
  std::string replicate_hot;        // "", a count, or "all"
  std::string replicas_from;        // route trace file
  std::string spine = "bf16";       // bf16 | int8 (not implemented yet)
  int pause_ms = 0;                 // test aid: sleep after each unit of work
  bool quiet = false;
};

Status prepare_store(const PrepareOptions& o);

// "DIR[:RATE]" -> absolute root and rate in MB/s (0: measure).
Result<std::pair<std::string, double>> parse_drive_arg(const std::string& arg);
// Every --drive parsed, none twice, each an existing directory (prepare never
// creates a drive root); `make-model --store` checks them before writing anything.
Result<std::vector<std::pair<std::string, double>>> parse_drive_args(const std::vector<std::string>& args);
Status check_drive_roots(const std::vector<std::string>& roots);
// The path checks that need no checkpoint: the drives as above; --out neither
// the source nor inside it; the source not inside --out/spine; no drive root
// inside the source.
Status check_prepare_paths(const PrepareOptions& o);

}  // namespace deltafin
