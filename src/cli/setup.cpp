// `deltafin setup --repo ORG/NAME[@REVISION] --out STORE --drive DIR [--drive ...]
//   [--endpoint URL] [--token-file F] [--stream] [--retries N] [--stall-timeout S]
//   [--retry-backoff-ms MS] [prepare's options]`, or `--from DIR`;
//   `deltafin setup --resume --out STORE` completes a streamed store.
#include "cli/command.h"
#include "hub/setup.h"

namespace deltafin::cli {

namespace {

void setup(CLI::App& root) {
  auto o = std::make_shared<hub::SetupOptions>();
  auto* cmd = root.add_subcommand(
      "setup", "Install a model from a Hugging Face repository (or a mirror, or a local snapshot) as a store");
  set_example(cmd, "deltafin setup --repo moonshotai/Kimi-K3 --out /mnt/nvme0/k3 --drive /mnt/nvme0 --drive /mnt/nvme1");
  cmd->add_option("--repo", o->repo, "ORG/NAME or ORG/NAME@REVISION (branch, tag or commit; default main)");
  cmd->add_option("--from", o->from_dir, "A local snapshot directory instead of --repo");
  cmd->add_option("--endpoint", o->endpoint, "The Hub or a mirror serving its paths")->capture_default_str();
  cmd->add_option("--token-file", o->token_file, "File holding an access token (sent as a Bearer token)");
  cmd->add_option("--out", o->prepare.out_dir, "Store directory (created; an interrupted setup resumes)")->required();
  cmd->add_option("--drive", o->prepare.drives, "Drive root for expert packs, DIR or DIR:MBPS (repeatable; required but "
                  "with --resume)");
  cmd->add_option("--replicate-hot", o->prepare.replicate_hot, "Replicate this many experts (or 'all') on a second drive");
  cmd->add_option("--replicas-from", o->prepare.replicas_from, "Route trace or heat file ranking experts by heat");
  cmd->add_option("--spine", o->prepare.spine, "Spine precision: bf16 (default, weight-exact) | int8 (row-int8, lossy)");
  cmd->add_option("--connections", o->connections, "Range requests in flight per file")->capture_default_str();
  cmd->add_option("--chunk-mb", o->chunk_mb, "MiB per Range request (the unit of resume)")->capture_default_str();
  cmd->add_option("--retries", o->retry.retries,
                  "Retries of a request that is reset, stalls, or answers 408, 429 or 5xx (each from the last byte "
                  "written, after a backoff)")
      ->capture_default_str();
  cmd->add_option("--stall-timeout", o->retry.stall_timeout_s,
                  "Seconds under 1 KiB/s after which a transfer counts as stalled (and is retried)")
      ->capture_default_str();
  cmd->add_option("--retry-backoff-ms", o->retry.backoff_ms,
                  "The wait before the first retry; doubled for each further one (at most 60 s)")
      ->capture_default_str();
  cmd->add_flag("--stream", o->stream,
                "Install the spine and the manifest only; run and serve fetch each expert on its first use "
                "(setup --resume completes the store)");
  cmd->add_flag("--resume", o->resume,
                "Complete a store made with --stream: download and verify every shard, check the experts fetched "
                "so far, write the rest (with --out, and optionally the download options --token-file, --connections, "
                "--chunk-mb, --retries, --stall-timeout, --retry-backoff-ms; may run while the store is in use)");
  cmd->add_flag("--keep-checkpoint", o->keep_checkpoint, "Keep the downloaded checkpoint in STORE/.setup/checkpoint");
  cmd->add_flag("--no-space-check", [o](int64_t) { o->space_check = false; }, "Skip the up-front disk-space check");
  cmd->add_option("--pause-ms", o->prepare.pause_ms, "Test aid: sleep after each file and unit of work")->group("");
  cmd->add_flag("--quiet", o->prepare.quiet, "No progress output");
  cmd->callback([o] {
    Status s = hub::setup_store(*o);
    set_exit_code(s.ok() ? 0 : fail(s.message()));
  });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
