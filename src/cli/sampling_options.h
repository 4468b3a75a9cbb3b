// The seeded-sampling options run and chat share (docs/guide/sampling.md):
// --temperature, --top-p, --top-k, --min-p, the two penalties and --seed.
#pragma once
#include <CLI/CLI.hpp>

#include "generate/sampler.h"

namespace deltafin::cli {

void add_sampling_options(CLI::App* cmd, SamplingParams& sp);

}  // namespace deltafin::cli
