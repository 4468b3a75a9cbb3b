// `deltafin simulate-drives --trace FILE (--store STORE | --experts E
//   --moe-layers L --span-bytes B) --drive BW[:LAT_US[:QD[:REQ]]] [--drive ...]
//   [--link MBps] [--replicate-hot N|all] [--replicas-from TRACE] [--ladder N]
//   [--prompt-tokens P] [--compute-us-per-layer US] [--json OUT] [--svg OUT]`:
// replays a route trace through the read engine's scheduler on simulated
// drives (docs/design/simulator.md).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/svg_chart.h"
#include "cli/command.h"
#include "sim/drive_probe.h"
#include "sim/simulate.h"
#include "store/manifest.h"
#include "store/placement.h"

namespace deltafin::cli {

namespace {

struct SimulateArgs {
  std::string trace, store;
  int experts = 0, moe_layers = 0;
  uint64_t span_bytes = 0;
  std::vector<std::string> drives;
  double link_mb_s = 0;
  double probe_seconds = 2.0;  // probe-store: seconds of span reads per drive
  std::string replicate_hot, replicas_from;
  int ladder = 0;
  int prompt_tokens = 0;
  int verify_block = 1;
  double compute_us = 0;
  uint64_t ram_slots = 0;
  double ram_gb = 0;
  std::string json_out, svg_out;
};

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return error("{}: cannot open for writing", path);
  f << text;
  f.close();
  if (!f) return error("{}: write failed", path);
  return {};
}

// Everything the run needs, from the arguments (and the store's manifest).
struct Plan {
  sim::SimOptions opts;
  std::vector<sim::DriveModel> models;  // as given (the ladder cycles through them)
  sim::SimWorkload work;
  sim::RouteTrace trace;
  ReplicaSelection replicas;
  std::string placement;  // how the placement was made, for the report
};

Result<Plan> make_plan(const SimulateArgs& a) {
  Plan p;
  const bool synthetic = a.experts || a.moe_layers || a.span_bytes;
  if (!a.store.empty() && synthetic)
    return error("give either --store or --experts/--moe-layers/--span-bytes, not both");
  if (a.store.empty() && !(a.experts > 0 && a.moe_layers > 0 && a.span_bytes > 0))
    return error("without --store, --experts, --moe-layers and --span-bytes are all required (each > 0)");
  if (!(a.link_mb_s >= 0)) return error("--link must be >= 0 MB/s");
  if (!(a.compute_us >= 0)) return error("--compute-us-per-layer must be >= 0");
  p.opts.link_mb_s = a.link_mb_s;
  p.work.compute_s_per_layer = a.compute_us * 1e-6;
  if (a.ram_slots && a.ram_gb > 0) return error("give --ram-slots or --ram-gb, not both");

  // Drive models: given, or measured by the probe.
  auto parse_drives = [&]() -> Status {
    for (const auto& d : a.drives) {
      if (d.rfind("probe-store:", 0) == 0) {
        sim::ProbeSettings ps;
        ps.seconds = a.probe_seconds;
        DF_ASSIGN(auto models, sim::probe_store_drive_models(d.substr(12), ps));
        for (const auto& m : models) {
          std::fprintf(stderr, "drive %zu of %s: %.0f MB/s, %.1f us latency, %.0f MB/s per request (probe of its packs)\n",
                       p.models.size(), d.c_str(), m.mb_s, m.latency_us, m.request_mb_s);
          p.models.push_back(m);
        }
        continue;
      }
      if (d.rfind("probe:", 0) == 0) {
        DF_ASSIGN(sim::DriveModel m, sim::probe_drive_model(d.substr(6)));
        std::fprintf(stderr, "drive %s: %.0f MB/s, %.1f us latency, %.0f MB/s per request (probe)\n", d.c_str(), m.mb_s,
                     m.latency_us, m.request_mb_s);
        p.models.push_back(m);
        continue;
      }
      DF_ASSIGN(sim::DriveModel m, sim::parse_drive_model(d));
      p.models.push_back(m);
    }
    return {};
  };
  std::vector<int> layers;
  if (!a.store.empty()) {
    DF_ASSIGN(Manifest m, Manifest::load(a.store));
    DF_TRY(parse_drives());
    if (p.models.empty()) {
      for (const auto& d : m.drives) p.models.push_back({std::max(d.rate_mb_s, 1.0)});
    } else if (p.models.size() != m.drives.size()) {
      return error("{}: the store has {} drives, {} --drive models were given", a.store, m.drives.size(),
                   p.models.size());
    }
    p.work.moe_layers = int(m.moe_layers.size());
    p.work.experts = m.num_experts;
    p.work.span = m.span_bytes;
    for (const auto& x : m.experts) {
      std::vector<int> copies;
      for (const auto& at : x.at) copies.push_back(at.drive);
      p.work.copies.push_back(copies);
    }
    layers = m.moe_layers;
    DF_ASSIGN(p.trace, sim::read_route_steps(a.trace, layers, 0, m.num_experts, a.prompt_tokens, a.verify_block));
    p.placement = fmt::format("the store's ({})", a.store);
  } else {
    DF_TRY(parse_drives());
    if (p.models.empty()) return error("give at least one --drive BW_MBps[:LATENCY_US[:QUEUE_DEPTH[:REQUEST_MBps]]]");
    p.work.moe_layers = a.moe_layers;
    p.work.experts = a.experts;
    p.work.span = a.span_bytes;
    DF_ASSIGN(p.trace, sim::read_route_steps(a.trace, {}, a.moe_layers, a.experts, a.prompt_tokens, a.verify_block));
    layers = p.trace.layers;
    while (int(layers.size()) < a.moe_layers) layers.push_back(layers.empty() ? 0 : layers.back() + 1);
  }
  DF_ASSIGN(p.replicas, select_replicas(a.replicate_hot, a.replicas_from, layers, p.work.experts));
  if (a.store.empty()) {
    std::vector<double> rates;
    for (const auto& m : p.models) rates.push_back(m.mb_s);
    const uint64_t reps = p.models.size() >= 2 ? p.replicas.replicas : 0;
    if (p.replicas.replicas > 0 && p.models.size() < 2 && a.ladder < 2)
      return error("replicas need at least two --drive models (or --ladder 2 or more)");
    DF_ASSIGN(p.work.copies,
              sim::planned_copies(p.work.moe_layers, p.work.experts, p.work.span, rates, p.replicas.hot, reps));
    p.placement = fmt::format("planned as prepare would for {} drive(s), {} replicas", p.models.size(), reps);
  }
  p.opts.drives = p.models;
  p.work.steps = p.trace.steps;
  p.work.ram_slots = a.ram_gb > 0 ? uint64_t(a.ram_gb * 1e9 / double(p.work.span)) : a.ram_slots;
  return p;
}

void print_report(const SimulateArgs& a, const Plan& p, const sim::SimReport& r,
                  const std::vector<sim::LadderRung>& ladder) {
  std::printf("trace %s: %d positions, %zu MoE layers x %d experts, span %.3f MB per expert\n", a.trace.c_str(),
              p.trace.positions, size_t(p.work.moe_layers), p.work.experts, double(p.work.span) / 1e6);
  std::printf("placement: %s; link: %s; compute per layer: %.0f us\n", p.placement.c_str(),
              a.link_mb_s > 0 ? fmt::format("{:.0f} MB/s shared", a.link_mb_s).c_str() : "none", a.compute_us);
  std::printf("\n%-5s %9s %8s %4s %10s %8s %7s %12s\n", "drive", "MB/s", "lat us", "QD", "MB read", "reads", "busy",
              "est. MB/s");
  for (size_t d = 0; d < r.drives.size(); ++d) {
    const auto& m = p.models[d];
    const auto& s = r.drives[d];
    std::printf("%-5zu %9.0f %8.1f %4d %10.1f %8llu %6.1f%% %12.0f\n", d, m.mb_s, m.latency_us, m.queue_depth,
                double(s.bytes) / 1e6, (unsigned long long)s.reads,
                r.total_s > 0 ? 100 * s.busy_seconds / r.total_s : 0.0, s.rate_estimate_mb_s);
  }
  uint64_t pre_bytes = 0, dec_bytes = 0;
  for (const auto& s : r.steps) (s.prefill ? pre_bytes : dec_bytes) += s.bytes;
  std::printf("\n%-14s %6s %7s %11s %11s %10s %9s\n", "", "steps", "tokens", "time ms", "ms/token", "MB read", "MB/s");
  auto row = [](const char* name, int steps, int tokens, double s, uint64_t bytes) {
    std::printf("%-14s %6d %7d %11.3f %11.3f %10.1f %9.0f\n", name, steps, tokens, s * 1e3,
                tokens ? s * 1e3 / tokens : 0.0, double(bytes) / 1e6, s > 0 ? double(bytes) / 1e6 / s : 0.0);
  };
  if (r.prefill_tokens) row("prefill block", 1, r.prefill_tokens, r.prefill_s, pre_bytes);
  if (r.decode_steps)
    row(a.verify_block > 1 ? "verify blocks" : "decode", r.decode_steps, r.decode_tokens, r.decode_s, dec_bytes);
  row("trace total", int(r.steps.size()), r.tokens, r.total_s, r.bytes);
  if (r.ram_requests)
    std::printf("ram tier: %llu slots, %llu of %llu expert requests from RAM (%.1f%%)\n",
                (unsigned long long)p.work.ram_slots, (unsigned long long)r.ram_hits,
                (unsigned long long)r.ram_requests, 100.0 * double(r.ram_hits) / double(r.ram_requests));
  std::printf("expert-read time per token: %.3f ms (%s); split reads: %llu\n", r.per_token_s() * 1e3,
              r.decode_steps ? "mean over decode tokens" : "trace total / positions", (unsigned long long)r.split_reads);
  if (!ladder.empty()) {
    std::printf("\nladder: 1..%zu drives of the given model(s), placement planned as prepare would%s\n", ladder.size(),
                p.replicas.replicas ? fmt::format(" ({} replicas from 2 drives on)", p.replicas.replicas).c_str() : "");
    std::printf("%6s %11s %9s %7s\n", "drives", "ms/token", "speed-up", "of ideal");
    for (const auto& l : ladder)
      std::printf("%6d %11.3f %8.2fx %6.0f%%\n", l.drives, l.per_token_s * 1e3, l.speedup, 100 * l.speedup / l.drives);
  }
}

nlohmann::json to_json(const SimulateArgs& a, const Plan& p, const sim::SimReport& r,
                       const std::vector<sim::LadderRung>& ladder) {
  nlohmann::json j;
  j["trace"] = a.trace;
  j["positions"] = p.trace.positions;
  j["moe_layers"] = p.work.moe_layers;
  j["experts"] = p.work.experts;
  j["span_bytes"] = p.work.span;
  j["placement"] = p.placement;
  j["link_mb_s"] = a.link_mb_s;
  j["compute_us_per_layer"] = a.compute_us;
  for (size_t d = 0; d < r.drives.size(); ++d)
    j["drives"].push_back({{"mb_s", p.models[d].mb_s},
                           {"latency_us", p.models[d].latency_us},
                           {"queue_depth", p.models[d].queue_depth},
                           {"request_mb_s", p.models[d].request_mb_s},
                           {"bytes", r.drives[d].bytes},
                           {"reads", r.drives[d].reads},
                           {"busy_seconds", r.drives[d].busy_seconds},
                           {"rate_estimate_mb_s", r.drives[d].rate_estimate_mb_s}});
  j["total_seconds"] = r.total_s;
  j["tokens"] = r.tokens;
  j["prefill"] = {{"tokens", r.prefill_tokens}, {"seconds", r.prefill_s}};
  j["decode"] = {{"steps", r.decode_steps}, {"tokens", r.decode_tokens}, {"seconds", r.decode_s}};
  j["verify_block"] = a.verify_block;
  j["seconds_per_token"] = r.per_token_s();
  j["bytes"] = r.bytes;
  j["reads"] = r.reads;
  j["split_reads"] = r.split_reads;
  j["ram_slots"] = p.work.ram_slots;
  j["ram_requests"] = r.ram_requests;
  j["ram_hits"] = r.ram_hits;
  j["steps"] = nlohmann::json::array();
  for (const auto& s : r.steps)
    j["steps"].push_back({{"first_pos", s.first_pos},
                          {"tokens", s.tokens},
                          {"prefill", s.prefill},
                          {"seconds", s.seconds},
                          {"bytes", s.bytes}});
  j["ladder"] = nlohmann::json::array();
  for (const auto& l : ladder)
    j["ladder"].push_back({{"drives", l.drives},
                           {"seconds_per_token", l.per_token_s},
                           {"total_seconds", l.total_s},
                           {"speedup", l.speedup}});
  return j;
}

int run(const SimulateArgs& a) {
  auto plan = make_plan(a);
  if (!plan.ok()) return fail(plan.message());
  auto rep = sim::simulate(plan->opts, plan->work);
  if (!rep.ok()) return fail(rep.message());
  std::vector<sim::LadderRung> ladder;
  if (a.ladder > 0) {
    auto l =
        sim::drive_ladder(a.ladder, plan->opts, plan->models, plan->work, plan->replicas.hot, plan->replicas.replicas);
    if (!l.ok()) return fail(l.message());
    ladder = *l;
  }
  print_report(a, *plan, *rep, ladder);
  if (!a.json_out.empty())
    if (Status s = write_text(a.json_out, to_json(a, *plan, *rep, ladder).dump(2) + "\n"); !s.ok())
      return fail(s.message());
  if (!a.svg_out.empty()) {
    if (ladder.empty()) return fail("--svg draws the drive ladder: give --ladder N");
    bench::Chart c;
    c.title = "Simulated speed-up vs drives";
    c.xlabel = "drives";
    c.ylabel = "speed-up vs 1 drive";
    bench::Series got{"simulated", {}}, ideal{"ideal (linear)", {}};
    for (const auto& l : ladder)
      got.points.push_back({double(l.drives), l.speedup}), ideal.points.push_back({double(l.drives), double(l.drives)});
    c.series = {got, ideal};
    if (Status s = write_text(a.svg_out, bench::render_svg(c)); !s.ok()) return fail(s.message());
  }
  return 0;
}

void setup(CLI::App& root) {
  auto* cmd = root.add_subcommand(
      "simulate-drives", "Replay a route trace through the read scheduler on simulated drives (docs/design/simulator.md)");
  set_example(cmd, "deltafin simulate-drives --trace /tmp/k3-trace.jsonl --experts 896 --moe-layers 60 --span-bytes 3133440 --drive 7000:80 --ladder 4");
  static SimulateArgs a;
  cmd->add_option("--trace", a.trace, "Route trace from `run --route-trace` (JSON lines)")->required();
  cmd->add_option("--store", a.store, "Use this store's manifest: its placement, span and shape");
  cmd->add_option("--experts", a.experts, "Experts per MoE layer (without --store)");
  cmd->add_option("--moe-layers", a.moe_layers, "Number of MoE layers (without --store)");
  cmd->add_option("--span-bytes", a.span_bytes, "Bytes read per expert (without --store)");
  cmd->add_option(
      "--drive", a.drives,
      "Drive model BW_MBps[:LATENCY_US[:QUEUE_DEPTH[:REQUEST_MBps]]] (defaults 100 us, 4, no per-request limit), probe:DIR to measure one, or "
      "probe-store:STORE to measure every drive of a store on its own packs (repeatable)");
  cmd->add_option("--link", a.link_mb_s, "Shared link cap over all drives, MB/s (e.g. a PCIe switch); 0: none");
  cmd->add_option("--probe-seconds", a.probe_seconds, "probe-store: seconds of span-sized reads per drive")->check(CLI::Range(0.05, 600.0));
  cmd->add_option("--replicate-hot", a.replicate_hot, "As prepare: replicate this many experts (or 'all')");
  cmd->add_option("--replicas-from", a.replicas_from, "As prepare: rank experts for replicas by this route trace");
  cmd->add_option("--ladder", a.ladder, "Also simulate 1..N drives of the given model(s)")->check(CLI::Range(0, 256));
  cmd->add_option("--verify-block", a.verify_block,
                  "Decode in verify blocks of K rows: each reads the union of its K positions' experts once per MoE "
                  "layer (drafting with every guess accepted; 1: one token a step)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--prompt-tokens", a.prompt_tokens, "Positions below P form one prefill block")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--compute-us-per-layer", a.compute_us, "Compute time added after each MoE layer's reads, us");
  cmd->add_option("--ram-slots", a.ram_slots, "A RAM tier of this many expert slots (the store's policy)");
  cmd->add_option("--ram-gb", a.ram_gb, "... or of this many GB (1e9 bytes) of expert spans")->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--json", a.json_out, "Write the results as JSON to this file");
  cmd->add_option("--svg", a.svg_out, "Write the ladder chart (speed-up vs drives) as SVG to this file");
  cmd->callback([] { set_exit_code(run(a)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
