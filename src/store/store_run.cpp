#include "store/store_run.h"

#include <charconv>
#include <filesystem>
#include <optional>

#include "io/probe.h"
#include "model/memory_plan.h"
#include "store/heat_file.h"
#include "store/spine_pack.h"

namespace deltafin {

namespace {

// A fixed --prefetch count; nullopt for "auto" and for anything invalid.
std::optional<int> fixed_prefetch(const std::string& v) {
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 0 || n > 1024) return std::nullopt;
  return n;
}

}  // namespace

CLI::Option* add_store_run_options(CLI::App* cmd, StoreRunOptions& o) {
  auto* store = cmd->add_option("--store", o.store, "Model store written by `deltafin prepare`");
  cmd->add_option("--verify", o.verify, "Check every expert read's xxh3-128 (on | off)")->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--io", o.io, "Store reads: auto | uring | pread")->check(CLI::IsMember({"auto", "uring", "pread"}));
  cmd->add_option("--direct", o.direct, "O_DIRECT store reads (on | off)")->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--queue-depth", o.queue_depth, "Store reads in flight per drive")->check(CLI::Range(1, 1024));
  cmd->add_option("--prefetch", o.prefetch,
                  "Experts per row to guess for the next MoE layer (its router on the state known so far) and "
                  "read ahead, or 'auto' (per layer, as many as its guesses are mostly right); exact: only read "
                  "timing changes (0: off)")
      ->check([](const std::string& v) -> std::string {
        return v == "auto" || fixed_prefetch(v) ? "" : "expects auto or a number 0..1024";
      })
      ->capture_default_str();
  cmd->add_option("--prefetch-depth", o.prefetch_depth,
                  "Of the reads in flight per drive, at most this many are prefetches (-1: queue depth / 2)")
      ->check(CLI::Range(-1, 1024));
  cmd->add_option("--arena-mib", o.arena_mib,
                  "Memory for expert read buffers, MiB (at least one expert is always held); a layer's union of "
                  "experts larger than this is read in tiles")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--ram-experts-gb", o.ram_experts_gb,
                  "Keep verified experts in RAM, GB (1e9 bytes), or 'auto' (MemAvailable after the spine, read "
                  "arena, session state and a margin); exact: only where bytes come from changes (0: off)")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        char* end = nullptr;
        const double g = std::strtod(v.c_str(), &end);
        if (v.empty() || *end || !(g >= 0) || g > 1e6) return "expects a number of GB >= 0, or auto";
        return "";
      });
  cmd->add_option("--ram-age-every", o.ram_age_every,
                  "RAM tier policy: scores halve every N expert requests (0: 8 x slots, at least 1024; "
                  "`trace-stats --ram-age-every` replays a trace with other values)");
  cmd->add_flag("!--no-heat", o.heat,
                "Neither read STORE/heat.json (the RAM tier's warm start) nor add this run's expert counts to it");
  cmd->add_flag("!--no-probe", o.probe, "With --stats: skip the raw drive probe");
  cmd->add_option("--probe-seconds", o.probe_seconds,
                  "With --stats: seconds of each raw drive probe (one before and one after the run, per drive); "
                  "a drive whose rate drifts needs longer probes")
      ->check(CLI::Range(0.05, 600.0));
  cmd->add_option("--probe-footprint-mib", o.probe_footprint_mib,
                  "With --stats: MiB of memory the probe's reads go round (0: one buffer per read in flight, "
                  "which a host's cache may hold; docs/design/store-and-read-engine.md)")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 16))->capture_default_str();
  return store;
}

Result<StoreModel> open_store_model(const StoreRunOptions& o, int threads, std::function<void(const std::string&)> log) {
  DF_ASSIGN(Manifest man, Manifest::load(o.store));
  StoreModel sm;
  if (!man.sealed) sm.warnings.push_back(fmt::format("{}: {}", o.store, kUnsealedManifestWarning));
  // Before any header is parsed: a damaged spine file is named as damaged,
  // not reported as whatever its bytes now fail to be.
  sm.spine_check = check_spine_files(man, o.store, o.verify == "on", threads);
  if (!sm.spine_check.problems.empty()) {
    std::string all;
    for (const auto& p : sm.spine_check.problems) all += (all.empty() ? "" : "; ") + p;
    return error("{}: the store's spine does not match its manifest (the spine has no replica; restore the file or "
                 "prepare the store again): {}",
                 o.store, all);
  }
  DF_ASSIGN(auto spine, Checkpoint::open((std::filesystem::path(o.store) / kSpineDirName).string()));
  DF_ASSIGN(ModelConfig cfg, ModelConfig::from_json(spine->config()));
  StoreReadOptions ro;
  ro.engine.log = std::move(log);
  ro.engine.verify = o.verify == "on";
  ro.engine.direct = o.direct == "on";
  ro.engine.backend = o.io == "uring" ? io::Backend::Uring : o.io == "pread" ? io::Backend::Pread : io::Backend::Auto;
  ro.engine.queue_depth = o.queue_depth;
  ro.arena_bytes = uint64_t(o.arena_mib * double(1 << 20));
  ro.engine.pread_threads = std::min(o.queue_depth, 16);
  ro.engine.prefetch_depth = o.prefetch_depth >= 0 ? o.prefetch_depth : std::max(1, o.queue_depth / 2);
  std::string auto_line;
  if (o.ram_experts_gb == "auto") {
    uint64_t spine = 0;
    for (const auto& f : man.spine_files) spine += f.size;
    const uint64_t arena = StoreExpertSource::arena_slots(man, ro.arena_bytes) * man.span_bytes;
    // Per-sequence state: the KDA state plus a 32,768-token MLA cache.
    const MemoryPlan plan = plan_from_config(cfg);
    DF_ASSIGN(AutoTierSize a, auto_tier_bytes(spine, arena, plan.kda_state_bytes + 32768 * plan.cache_bytes_per_token()));
    ro.ram_tier_bytes = a.bytes;
    auto_line = a.line;
  } else {
    ro.ram_tier_bytes = uint64_t(std::strtod(o.ram_experts_gb.c_str(), nullptr) * 1e9);
  }
  ro.ram_tier_age_every = o.ram_age_every;
  HeatFile heat;
  std::string heat_line;
  if (ro.ram_tier_bytes > 0 && o.heat) {
    auto h = load_heat(o.store, man.store_id, int(man.moe_layers.size()), man.num_experts);
    if (h.ok()) {
      heat = std::move(h.value());
      ro.tier_seed = &heat;
      heat_line = fmt::format("; warm start from {} ({} runs)", kHeatFileName, heat.runs);
    } else {
      heat_line = fmt::format("; cold start ({})", h.message());
    }
  }
  if (ro.ram_tier_bytes > 0 && ro.ram_tier_bytes < man.span_bytes) {
    sm.warnings.push_back(fmt::format("--ram-experts-gb {}: {} bytes hold no expert span of {} bytes; the RAM tier is off",
                                      o.ram_experts_gb, ro.ram_tier_bytes, man.span_bytes));
    ro.ram_tier_bytes = 0;
  }
  if (man.stream) {
    ro.store_dir = o.store;
    if (o.remote) {
      DF_ASSIGN(ro.remote, o.remote(man, o.store));
    }
  }
  DF_ASSIGN(auto src, StoreExpertSource::open(man, cfg, ro, &sm.warnings));
  sm.source = src.get();
  if (const FetchedLog* f = sm.source->fetched()) {
    const size_t all = man.experts.size();
    size_t local = 0;
    for (size_t mi = 0; mi < man.moe_layers.size(); ++mi)
      for (int e = 0; e < man.num_experts; ++e) local += sm.source->local(int(mi), e);
    sm.stream_line = fmt::format(
        "store: streamed, {} of {} experts local; {}; an expert fetched on first use is checked against the "
        "xxh3-128 recorded when it was fetched, not yet against its shard's SHA-256 (`deltafin setup --resume --out "
        "{}` completes the store and verifies it){}",
        local, all,
        ro.remote ? "the others are fetched " + ro.remote->describe() + " when first routed"
                  : "the others cannot be fetched (offline)",
        o.store, f->skipped() ? fmt::format("; {} damaged records in {} ignored", f->skipped(), f->path()) : "");
  }
  std::unique_ptr<ExpertSource> experts = std::move(src);
  DF_ASSIGN(sm.model, Model::open_with(std::move(spine), std::move(experts), threads));
  if (o.prefetch == "auto")
    sm.model->set_prefetch_auto(kAutoGuessCap * sm.model->config().moe.top_k, kAutoGuessPrecision);
  else
    sm.model->set_prefetch(fixed_prefetch(o.prefetch).value_or(0));
  if (const RamTier* t = sm.source->tier()) {
    const uint64_t all = uint64_t(man.moe_layers.size()) * uint64_t(man.num_experts);
    sm.tier_line = fmt::format("{}store: ram tier {} of {} experts ({:.3f} GB, {:.1f}% of the routed experts), {}, "
                               "mapped in {:.2f} s{}",
                               auto_line.empty() ? "" : auto_line + "\n", t->slots(), all, t->bytes() / 1e9,
                               100.0 * double(t->slots()) / double(all), t->lock_note(), t->populate_seconds(),
                               heat_line);
  } else if (!auto_line.empty()) {
    sm.tier_line = auto_line + "; the RAM tier is off";
  }
  // The manifest's label and the tensors must agree: a lossy spine is never
  // run under the weight-exact name (or the other way round).
  const size_t i8 = sm.model->int8_matrices();
  if ((man.spine_dtype == "int8") != (i8 > 0))
    return error("{}: manifest says spine {} but the spine holds {} row-int8 matrices", o.store, man.spine_dtype, i8);
  if (o.verify != "on")
    sm.warnings.push_back("--verify off: the spine's and every expert read's xxh3-128 are not checked");
  sm.spine_line = man.spine_dtype == "int8"
                      ? fmt::format("store: spine {}: {} matrices row-int8, logits are not those of the BF16 checkpoint",
                                    spine_label(man.spine_dtype), i8)
                      : fmt::format("store: spine {}", spine_label(man.spine_dtype));
  return sm;
}

Status save_store_heat(const StoreExpertSource& src, const StoreRunOptions& o) {
  if (!o.heat) return {};
  const Manifest& m = src.manifest();
  bool any = false;
  for (uint64_t u : src.uses()) any = any || u > 0;
  if (!any) return {};
  auto h = load_heat(o.store, m.store_id, int(m.moe_layers.size()), m.num_experts);
  HeatFile heat;
  if (h.ok()) {
    heat = std::move(h.value());
  } else {  // none yet, or one that does not fit this store: start again
    heat.store_id = m.store_id;
    heat.moe_layers = int(m.moe_layers.size());
    heat.experts = m.num_experts;
  }
  heat.add_run(src.uses());
  return save_heat(o.store, heat);
}

std::string spine_check_line(const StoreModel& sm, const StoreRunOptions& o) {
  const SpineCheck& c = sm.spine_check;
  if (o.verify != "on") return fmt::format("store: spine not verified (--verify off): {} files, sizes checked", c.files);
  return fmt::format("store: spine verified at load: {} files, {:.1f} MB, xxh3-128 in {:.3f} s ({:.2f} GB/s, {} thread{})",
                     c.files, c.bytes / 1e6, c.seconds, c.seconds > 0 ? c.bytes / c.seconds / 1e9 : 0.0, c.threads,
                     c.threads == 1 ? "" : "s");
}

Result<io::ProbeResult> probe_store_drive(const StoreExpertSource& src, const StoreRunOptions& o, int drive,
                                          uint64_t seed) {
  return io::probe_files(src.drive_files(drive), src.manifest().span_bytes, src.engine().options().queue_depth,
                         64ull << 30, o.probe_seconds, seed, o.probe_footprint_mib << 20);
}

std::vector<double> probe_store_drives(const StoreExpertSource& src, const StoreRunOptions& o) {
  std::vector<double> out;
  for (int d = 0; d < src.engine().drive_count(); ++d) {
    auto pr = probe_store_drive(src, o, d, 7 + uint64_t(d));
    out.push_back(pr.ok() ? pr->mb_s : 0.0);
  }
  return out;
}

std::vector<std::string> store_stats_lines(const StoreExpertSource& src, const StoreRunOptions& o, double wall,
                                           double wait, const std::vector<double>& probe_before,
                                           const Model::GuessStats& guesses) {
  std::vector<std::string> out;
  out.push_back(fmt::format("store: spine {}", spine_label(src.manifest().spine_dtype)));
  const io::EngineStats s = src.engine().stats();
  const ExpertSourceStats es = src.stats();
  const int qd = src.engine().options().queue_depth;
  out.push_back(fmt::format("store: {} reads ok, {} retried on a replica, {} failed, {} split across replicas; verify {}",
                            s.reads_ok, s.retries, s.reads_failed, s.split_reads, o.verify));
  out.push_back(fmt::format("store: compute waited for experts {:.3f} s of {:.3f} s wall ({:.1f}%); checksum {:.3f} s for {:.1f} MB",
                            wait, wall, wall > 0 ? 100 * wait / wall : 0.0, s.checksum_seconds, s.checksum_bytes / 1e6));
  if (src.tier()) {
    const uint64_t req = es.ram_hits + es.ram_misses;
    out.push_back(fmt::format("store: ram tier {} slots: {} of {} expert requests from RAM ({:.1f}%), {} read from "
                              "drives; {} fills ({} of them claimed guesses taken in place), {} not admitted, {} evictions",
                              es.ram_slots, es.ram_hits, req, req ? 100.0 * double(es.ram_hits) / double(req) : 0.0,
                              es.ram_misses, es.ram_fills, es.ram_adopted, es.ram_bypassed, es.ram_evictions));
  }
  if (src.fetched()) {
    out.push_back(fmt::format("store: streamed: {} experts fetched on first use in {:.3f} s ({:.1f} MB); {} of {} "
                              "experts local now",
                              es.streamed_experts, es.streamed_seconds,
                              double(es.streamed_experts) * double(src.manifest().expert_bytes) / 1e6,
                              src.fetched()->local_count(), src.manifest().experts.size()));
  }
  if (o.prefetch == "auto" || fixed_prefetch(o.prefetch).value_or(0) > 0) {
    const std::string per_row =
        o.prefetch != "auto" ? o.prefetch
                             : fmt::format("auto ({:.1f} on average)",
                                           guesses.rows ? double(guesses.per_row_sum) / double(guesses.rows) : 0.0);
    out.push_back(fmt::format("store: prefetch {} guesses per row for the next MoE layer: {} reads issued, {} used "
                              "({:.1f}%), {} dropped ({:.1f} MB read or queued for nothing)",
                              per_row, es.prefetch_issued, es.prefetch_hits,
                              es.prefetch_issued ? 100.0 * es.prefetch_hits / es.prefetch_issued : 0.0,
                              es.prefetch_issued - es.prefetch_hits,
                              (es.prefetch_issued - es.prefetch_hits) * src.manifest().span_bytes / 1e6));
  }
  for (size_t d = 0; d < s.drives.size(); ++d) {
    const auto& ds = s.drives[d];
    const uint64_t bytes = ds.bytes[0] + ds.bytes[1];
    const double achieved = ds.busy_seconds > 0 ? bytes / ds.busy_seconds / 1e6 : 0;
    std::string probe = "probe skipped";
    if (o.probe && bytes > 0) {
      auto pr = probe_store_drive(src, o, int(d), 17 + d);
      if (!pr.ok()) {
        probe = "probe failed: " + pr.message();
      } else {
        const double before = d < probe_before.size() ? probe_before[d] : 0.0;
        const double ref = before > 0 ? 0.5 * (before + pr->mb_s) : pr->mb_s;
        probe = fmt::format("raw probe {}{:.1f} MB/s after ({}, random {} KiB reads at QD {} into {} MiB) -> engine "
                            "at {:.0f}% of {}",
                            before > 0 ? fmt::format("{:.1f} MB/s before, ", before) : "", pr->mb_s, pr->mode(),
                            src.manifest().span_bytes / 1024, qd, pr->footprint >> 20, ref > 0 ? 100 * achieved / ref : 0.0,
                            before > 0 ? "their mean" : "the probe");
      }
    }
    out.push_back(fmt::format("drive {} ({}): {}; demand {:.1f} MB in {} reads, prefetch {:.1f} MB in {} reads; "
                              "achieved {:.1f} MB/s over {:.3f} s busy, {:.2f} reads in flight on average (of {}); "
                              "{} I/O errors, {} checksum errors; {}",
                              d, ds.root, ds.mode, ds.bytes[0] / 1e6, ds.reads[0], ds.bytes[1] / 1e6, ds.reads[1],
                              achieved, ds.busy_seconds, ds.busy_seconds > 0 ? ds.inflight_seconds / ds.busy_seconds : 0.0,
                              qd, ds.io_errors, ds.checksum_errors, probe));
  }
  return out;
}

}  // namespace deltafin
