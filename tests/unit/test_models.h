// Test checkpoints made once per test binary run with `deltafin make-model`.
#pragma once
#include <string>

namespace deltafin::testing {

// Path of a `tiny` checkpoint with this seed (written on first use into a temp dir).
const std::string& tiny_model(int seed);

// Runs a shell command; returns its exit status (or -1).
int run_command(const std::string& cmd);

// A whole file's bytes ("" when it cannot be read).
std::string slurp(const std::string& path);

}  // namespace deltafin::testing
