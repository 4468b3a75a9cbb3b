// `deltafin make-model --preset tiny|small|k3-shaped|k3-full-sparse --out DIR [--seed N]
//   [--experts-gb N] [--store STORE --drive DIR[:MBPS] ...]
// `deltafin make-model --preset dspark --target DIR --out DIR [--seed N]`: a DSpark-layout drafter for DIR
// `deltafin make-model --preset qwen3-moe-tiny|qwen3-tiny|... --out DIR [--seed N] [--expert-format fp8] [--vocab N]`
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint/dspark_writer.h"
#include "checkpoint/make_model.h"
#include "checkpoint/qwen3_writer.h"
#include "checkpoint/safetensors.h"
#include "cli/command.h"
#include "model/config.h"
#include "store/prepare.h"

namespace deltafin::cli {

namespace {

struct MakeModelArgs {
  std::string preset, out, store, target;
  std::string expert_format = "bf16";  // qwen3 presets: bf16 | fp8
  int vocab = 0;                       // qwen3 presets: vocabulary override
  std::vector<std::string> drives;
  uint64_t seed = 1;
  double experts_gb = 0;
  double route_skew = 0, route_persist = 0;
  int pause_ms = 0;
  bool quiet = false;
};

// The sizes a k3-shaped model gets from its budget.
void print_expert_sizes(const ModelPreset& p) {
  const uint64_t eb = preset_expert_bytes(p), layers = uint64_t(preset_moe_layers(p));
  std::printf("k3-shaped: %d MoE layers x %d experts (top-%d, %d shared), latent %d, expert inter %d\n", int(layers),
              p.experts, p.top_k, p.shared, p.latent, p.expert_inter);
  std::printf("  expert %llu bytes; routed experts %.3f GB in all; %.1f MB of routed experts per token (cold)\n",
              static_cast<unsigned long long>(eb), double(eb) * double(layers) * p.experts / 1e9,
              double(eb) * double(layers) * p.top_k / 1e6);
}

// A DSpark-layout drafter sized for the checkpoint in a.target.
int run_make_dspark(const MakeModelArgs& a) {
  if (a.target.empty()) return fail("--preset dspark needs --target DIR (the model it drafts for)");
  auto ck = Checkpoint::open(a.target);
  if (!ck.ok()) return fail(ck.message());
  auto cfg = ModelConfig::from_json(ck.value()->config());
  if (!cfg.ok()) return fail(cfg.message());
  const DsparkShape s = dspark_shape_for(cfg.value());
  if (Status st = write_dspark_checkpoint(s, a.out, a.seed); !st.ok()) return fail(st.message());
  std::string layers;
  for (int l : s.target_layers) layers += fmt::format("{}{}", layers.empty() ? "" : ",", l);
  std::printf("wrote dspark checkpoint for %s (hidden %d, %d layers, %d heads, target layers %s, seed %llu) to %s\n",
              a.target.c_str(), s.hidden, s.layers, s.heads, layers.c_str(), static_cast<unsigned long long>(a.seed),
              a.out.c_str());
  return 0;
}

// A Qwen3 / Qwen3-MoE checkpoint in the Hub's layout (checkpoint/qwen3_presets.h).
int run_make_qwen3(const MakeModelArgs& a) {
  if (!a.store.empty() || !a.drives.empty() || !a.target.empty() || a.route_skew != 0 || a.route_persist != 0)
    return fail(fmt::format("--preset {}: --store, --drive, --target, --route-skew and --route-persist do not apply",
                            a.preset));
  auto p = find_qwen3_preset(a.preset, Qwen3PresetOptions{a.expert_format, a.vocab, a.experts_gb});
  if (!p.ok()) return fail(p.message());
  if (p->name == "qwen3-235b-shaped")
    std::printf("qwen3-235b-shaped: moe_intermediate_size %d, routed experts %.3f GB (%s)\n", p->moe_inter,
                double(qwen3_expert_bytes_total(*p)) / 1e9, p->fp8 ? "fp8" : "bf16");
  if (Status s = write_qwen3_checkpoint(*p, a.out, a.seed); !s.ok()) return fail(s.message());
  std::printf("wrote %s checkpoint (%s, %d shards, seed %llu) to %s\n", p->name.c_str(), p->fp8 ? "fp8" : "bf16",
              p->shards, static_cast<unsigned long long>(a.seed), a.out.c_str());
  return 0;
}

int run_make_model(const MakeModelArgs& a) {
  if (a.preset == "dspark") return run_make_dspark(a);
  if (is_qwen3_preset(a.preset)) return run_make_qwen3(a);
  if (a.expert_format != "bf16" || a.vocab != 0)
    return fail("--expert-format and --vocab apply to the qwen3 presets only");
  if (!a.target.empty()) return fail("--target goes with --preset dspark");
  auto preset = find_preset(a.preset, a.experts_gb);
  if (preset.ok()) {
    preset->route_skew = a.route_skew;
    preset->route_persist = a.route_persist;
  }
  if (!preset.ok()) return fail(preset.message());
  if (a.store.empty() != a.drives.empty()) return fail("--store and --drive go together");
  PrepareOptions o;
  o.model_dir = a.out, o.out_dir = a.store, o.drives = a.drives, o.pause_ms = a.pause_ms, o.quiet = a.quiet;
  // Before the spine is written: a missing drive root or a store inside the
  // spine directory is refused with nothing left behind.
  if (!a.store.empty())
    if (Status s = check_prepare_paths(o); !s.ok()) return fail(s.message());
  if (preset->name == "k3-shaped") print_expert_sizes(*preset);
  if (a.store.empty()) {
    if (Status s = make_model(*preset, a.out, a.seed); !s.ok()) return fail(s.message());
    std::printf("wrote %s checkpoint (%d shards, seed %llu) to %s\n", preset->name.c_str(), preset->shards,
                static_cast<unsigned long long>(a.seed), a.out.c_str());
    return 0;
  }
  // The spine checkpoint plus a generator record, then the experts generated
  // straight into the store's packs: the disk never holds them twice.
  if (Status s = make_model(*preset, a.out, a.seed, ExpertOutput::GeneratorRecord); !s.ok()) return fail(s.message());
  if (!a.quiet) std::printf("wrote %s spine checkpoint and expert generator record (seed %llu) to %s\n", preset->name.c_str(),
                            static_cast<unsigned long long>(a.seed), a.out.c_str());
  std::fflush(stdout);
  if (Status s = prepare_store(o); !s.ok()) return fail(s.message());
  return 0;
}

void setup(CLI::App& root) {
  auto args = std::make_shared<MakeModelArgs>();
  auto* cmd = root.add_subcommand("make-model", "Write a test checkpoint in the published K3 layout");
  set_example(cmd, "deltafin make-model --preset tiny --out /tmp/tiny");
  cmd->add_option("--preset", args->preset,
                  "tiny | small | k3-shaped | k3-full-sparse | dspark (with --target) | qwen3-moe-tiny | qwen3-tiny | "
                  "qwen3-235b-shaped | qwen3-30b-a3b-sparse | qwen3-235b-a22b-sparse | qwen3-coder-480b-a35b-sparse")
      ->required();
  cmd->add_option("--target", args->target, "dspark: the checkpoint the drafter is sized for");
  cmd->add_option("--out", args->out, "output directory (created if needed)")->required();
  cmd->add_option("--seed", args->seed, "random seed for the weights (default 1)");
  cmd->add_option("--experts-gb", args->experts_gb,
                  "k3-shaped, qwen3-235b-shaped: total routed-expert size in GB (required; fractions allowed)");
  cmd->add_option("--expert-format", args->expert_format,
                  "qwen3 presets: bf16 (default) or fp8 (the Hub's -FP8 layout: E4M3 linears with 128x128 scales)");
  cmd->add_option("--vocab", args->vocab, "qwen3 presets: vocabulary size (default: the preset's)");
  cmd->add_option("--route-skew", args->route_skew,
                  "Popularity skew of the routing: each MoE layer's correction bias gets S x (Exp(1) - ln 2) per "
                  "expert, so a few experts are routed far more often (docs/guide/drives-and-ram-tier.md; 0: uniform)")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--route-persist", args->route_persist,
                  "Token-to-token persistence of the routing: text tokens' embeddings put weight W on a smooth ring "
                  "that greedy decoding walks along (0.8: K3's 39%; docs/guide/drives-and-ram-tier.md; 0: off, below 1)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--store", args->store,
                  "write the routed experts straight into this store (as `prepare` would); --out gets only the spine");
  cmd->add_option("--drive", args->drives, "with --store: drive root for expert packs, DIR or DIR:MBPS (repeatable)");
  cmd->add_option("--pause-ms", args->pause_ms, "Test aid: sleep after each unit of store work")->group("");
  cmd->add_flag("--quiet", args->quiet, "with --store: no progress output");
  cmd->callback([args] { set_exit_code(run_make_model(*args)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
