// `deltafin make-trace --moe-layers L --experts E --top-k K --positions P
//   [--keep F] [--skew S] [--seed N] --out T.jsonl`: a synthetic route trace
// with chosen persistence and popularity skew (src/sim/route_gen.h), for
// simulate-drives and trace-stats at shapes no test model has.
#include "cli/command.h"
#include "sim/route_gen.h"

namespace deltafin::cli {

namespace {

void setup(CLI::App& root) {
  auto* cmd = root.add_subcommand("make-trace",
                                  "Write a synthetic route trace with chosen persistence and skew (docs/guide/drives-and-ram-tier.md)");
  set_example(cmd, "deltafin make-trace --moe-layers 60 --experts 896 --top-k 16 --positions 256 --keep 0.38 --skew 0.4 --out /tmp/k3-trace.jsonl");
  static sim::RouteGenOptions o;
  static std::string out;
  cmd->add_option("--moe-layers", o.moe_layers, "MoE layers")->required()->check(CLI::Range(1, 4096));
  cmd->add_option("--experts", o.experts, "Experts per layer")->required()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--top-k", o.top_k, "Experts per position and layer")->required()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--positions", o.positions, "Token positions")->required()->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--keep", o.keep, "Probability that each of the previous position's experts is kept (0-1)");
  cmd->add_option("--skew", o.skew, "Popularity: weights exp(S x Exp(1)) per expert (0: uniform)");
  cmd->add_option("--seed", o.seed, "Random seed");
  cmd->add_option("--out", out, "Trace file (JSON lines, as run --route-trace)")->required();
  cmd->callback([] {
    auto routes = sim::generate_routes(o);
    if (!routes.ok()) return set_exit_code(fail(routes.message()));
    if (Status s = sim::write_route_trace(out, o, *routes); !s.ok()) return set_exit_code(fail(s.message()));
    set_exit_code(0);
  });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
