// What `run` (and later `serve` / `bench`) needs to use a store: its CLI
// options, opening the model from it, and the --stats lines.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "io/probe.h"
#include "model/model.h"
#include "store/spine_verify.h"
#include "store/store_source.h"

namespace deltafin {

// `--prefetch auto`: guesses per row up to this many times top_k, read ahead
// while at least this share of a rank's recent guesses were routed. A wrong
// guess costs a whole read, a right one only starts a read early: where the
// drive is the bound, guesses right one time in two slowed decode
// (docs/design/store-and-read-engine.md, "How many guesses").
inline constexpr int kAutoGuessCap = 2;
inline constexpr double kAutoGuessPrecision = 0.75;

struct StoreRunOptions {
  std::string store;
  std::string verify = "on";   // on | off
  std::string io = "auto";     // auto | uring | pread
  std::string direct = "on";   // on | off
  // Reads in flight per drive: few enough that a layer's reads finish one
  // after another, so experts are computed while the rest arrive (with 16
  // concurrent reads all finish together and the compute comes after;
  // docs/design/store-and-read-engine.md has the measurement).
  int queue_depth = 4;
  // Experts per row guessed for the next MoE layer and read ahead
  // (Model::set_prefetch): a number (0: off) or "auto", learned per layer
  // (Model::set_prefetch_auto: up to kAutoGuessCap x top_k per row, the ranks
  // whose guesses were routed at least kAutoGuessPrecision of the time). A
  // fixed 4 was the fastest measured before the RAM tier (docs/results/2026-11-30-k3s-cold-decode.md); with
  // the tier, 16 on the k3-shaped model, whose guesses are nearly all right
  // (docs/results/2026-12-larger-than-ram.md).
  std::string prefetch = "auto";
  // Of the reads in flight per drive, at most this many are prefetches
  // (-1: half the queue depth, at least one).
  int prefetch_depth = -1;
  // Bound on the expert read buffers, MiB (StoreReadOptions::arena_bytes): a
  // layer's union larger than this is fetched in tiles.
  double arena_mib = 8192;
  // RAM tier of verified experts, GB (1e9 bytes), or "auto" (what
  // MemAvailable leaves: ram_tier.h, auto_tier_bytes); "0": off.
  std::string ram_experts_gb = "0";
  uint64_t ram_age_every = 0;  // the tier policy's ageing period in requests (0: its default)
  bool heat = true;  // read STORE/heat.json for the tier's warm start, and add this run's counts to it
  bool probe = true;           // with --stats: measure each drive's raw rate before and after the run
  double probe_seconds = 1.0;  // per drive, per probe
  uint64_t probe_footprint_mib = io::kProbeFootprint >> 20;  // memory the probe's reads go round (io/probe.h)
  // Opens the fetcher of a streamed store (set by the commands, which link
  // the HTTP client: hub/expert_fetcher.h); unset, a streamed store runs
  // offline on the experts already local.
  std::function<Result<std::shared_ptr<RemoteExperts>>(const Manifest&, const std::string& store_dir)> remote;
};

// Adds --store, --verify, --io, --direct, --queue-depth, --prefetch, --prefetch-depth, --arena-mib,
// --ram-experts-gb, --no-heat, --no-probe;
// returns the --store option.
CLI::Option* add_store_run_options(CLI::App* cmd, StoreRunOptions& o);

struct StoreModel {
  std::unique_ptr<Model> model;
  StoreExpertSource* source = nullptr;  // owned by model
  std::vector<std::string> warnings;
  std::string spine_line;  // "store: spine row-int8 (lossy) ..." for the startup output
  std::string tier_line;   // "store: ram tier ..." (with --ram-experts-gb), else empty
  std::string stream_line;  // "store: streamed ..." for a streamed store, else empty
  SpineCheck spine_check;  // the load-time verification of the spine files (hashed unless --verify off)
};

// The spine from STORE/spine, the experts through a StoreExpertSource. Every
// spine file is checked against the manifest first (size, xxh3-128 unless
// --verify off, `threads` files at a time; no unlisted file), and any
// mismatch refuses the store naming the file. `log`: where the read engine's
// retry and healed-read lines go (empty: stderr).
Result<StoreModel> open_store_model(const StoreRunOptions& o, int threads,
                                    std::function<void(const std::string&)> log = {});

// Adds this run's expert requests to STORE/heat.json (unless --no-heat; a
// run that requested nothing leaves it alone). Advisory: the caller warns.
Status save_store_heat(const StoreExpertSource& src, const StoreRunOptions& o);

// "store: spine verified at load: ..." (or the line saying it was not).
std::string spine_check_line(const StoreModel& sm, const StoreRunOptions& o);

// --stats lines: bytes per drive and purpose, achieved MB/s (bytes over busy
// time) next to a raw O_DIRECT probe at the engine's queue depth, share of
// wall time spent waiting for experts, checksum time, I/O mode, retries, and
// the spine's precision label.
// Each drive's raw rate: random span-sized O_DIRECT reads of the store's
// packs at the engine's queue depth, `probe_seconds` each.
Result<io::ProbeResult> probe_store_drive(const StoreExpertSource& src, const StoreRunOptions& o, int drive,
                                          uint64_t seed);
// The same as MB/s (0 where the probe failed).
std::vector<double> probe_store_drives(const StoreExpertSource& src, const StoreRunOptions& o);

// `probe_before`: the rates probe_store_drives gave before the run (may be
// empty); the probe is repeated after the run and the engine's rate is
// compared with the mean of the two, so drift during the run shows.
// `guesses`: the model's next-layer guesses (Model::guess_stats).
std::vector<std::string> store_stats_lines(const StoreExpertSource& src, const StoreRunOptions& o, double wall_seconds,
                                           double wait_seconds, const std::vector<double>& probe_before,
                                           const Model::GuessStats& guesses);

}  // namespace deltafin
