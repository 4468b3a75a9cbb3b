// The spine's files against the manifest: every file the engine reads from
// STORE/spine (shards, index, config, tokenizer files) is listed there with
// its size and xxh3-128, and nothing unlisted sits next to them. `run`,
// `serve` and `bench` check all of it when they open a store (unless
// --verify off); `doctor` checks the sizes, and the checksums with --full.
#pragma once
#include <string>
#include <vector>

#include "store/manifest.h"

namespace deltafin {

struct SpineCheck {
  std::vector<std::string> problems;  // one per bad file, each naming it and saying what is wrong
  size_t files = 0;                   // listed files checked
  uint64_t bytes = 0;                 // bytes hashed
  double seconds = 0;                 // wall time of the hashing
  int threads = 1;
};

// hashes = false: sizes and unlisted files only. `threads` files are hashed
// at once (largest first).
SpineCheck check_spine_files(const Manifest& m, const std::string& store_dir, bool hashes, int threads);

}  // namespace deltafin
