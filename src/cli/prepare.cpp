// `deltafin prepare --model HF_DIR --out STORE --drive DIR[:MBPS] [--drive ...]
//   [--replicate-hot N|all] [--replicas-from ROUTE_TRACE] [--spine bf16|int8]`
#include "cli/command.h"
#include "store/prepare.h"

namespace deltafin::cli {

namespace {

void setup(CLI::App& root) {
  auto o = std::make_shared<PrepareOptions>();
  auto* cmd = root.add_subcommand("prepare", "Write a model store: spine pack, expert packs on drives, manifest");
  set_example(cmd, "deltafin prepare --model /data/Kimi-K3 --out /mnt/nvme0/k3 --drive /mnt/nvme0 --drive /mnt/nvme1");
  cmd->add_option("--model", o->model_dir, "Published checkpoint directory")->required();
  cmd->add_option("--out", o->out_dir, "Store directory (created; an interrupted prepare resumes)")->required();
  cmd->add_option("--drive", o->drives, "Drive root for expert packs, DIR or DIR:MBPS (repeatable)")->required();
  cmd->add_option("--replicate-hot", o->replicate_hot, "Replicate this many experts (or 'all') on a second drive");
  cmd->add_option("--replicas-from", o->replicas_from, "Route trace ('LAYER EXPERT [COUNT]' lines) ranking experts by heat");
  cmd->add_option("--spine", o->spine, "Spine precision: bf16 (default, weight-exact) | int8 (row-int8, lossy)");
  cmd->add_option("--pause-ms", o->pause_ms, "Test aid: sleep after each unit of work")->group("");
  cmd->add_flag("--quiet", o->quiet, "No progress output");
  cmd->callback([o] {
    Status s = prepare_store(*o);
    set_exit_code(s.ok() ? 0 : fail(s.message()));
  });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
