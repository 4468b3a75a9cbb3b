// Test checkpoints made once per test binary run with `deltafin make-model`.
#pragma once
#include <string>

namespace deltafin::testing {

// Path of a `tiny` checkpoint with this seed (written on first use into a temp dir).
const std::string& tiny_model(int seed);

// Path of a DSpark-layout drafter (`make-model --preset dspark`) for the
// checkpoint in `target_dir`, with this seed (written on first use).
const std::string& dspark_model(const std::string& target_dir, int seed);

// A fresh directory under the test binary's temp root.
std::string temp_dir(const std::string& name);

// Runs a shell command; returns its exit status (or -1).
int run_command(const std::string& cmd);

// A whole file's bytes ("" when it cannot be read).
std::string slurp(const std::string& path);

}  // namespace deltafin::testing
