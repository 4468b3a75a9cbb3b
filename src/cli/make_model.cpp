// `deltafin make-model --preset tiny|small|k3-full-sparse --out DIR [--seed N]`
#include <cstdio>
#include <string>

#include "checkpoint/make_model.h"
#include "cli/command.h"

namespace deltafin::cli {

namespace {

struct MakeModelArgs {
  std::string preset, out;
  uint64_t seed = 1;
};

int run_make_model(const MakeModelArgs& a) {
  auto preset = find_preset(a.preset);
  if (!preset.ok()) return fail(preset.message());
  if (Status s = make_model(*preset, a.out, a.seed); !s.ok()) return fail(s.message());
  std::printf("wrote %s checkpoint (%d shards, seed %llu) to %s\n", preset->name.c_str(), preset->shards,
              static_cast<unsigned long long>(a.seed), a.out.c_str());
  return 0;
}

void setup(CLI::App& root) {
  auto args = std::make_shared<MakeModelArgs>();
  auto* cmd = root.add_subcommand("make-model", "Write a test checkpoint in the published K3 layout");
  cmd->add_option("--preset", args->preset, "tiny | small | k3-full-sparse")->required();
  cmd->add_option("--out", args->out, "output directory (created if needed)")->required();
  cmd->add_option("--seed", args->seed, "random seed for the weights (default 1)");
  cmd->callback([args] { set_exit_code(run_make_model(*args)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
