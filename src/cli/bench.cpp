// `deltafin bench`: named arms of `run` flags, repeated in balanced order,
// every run checked against an exact token oracle, with the disk and memory
// limits probed in the same invocation. Each run is a fresh `deltafin run`
// process writing --stats-json; the harness never times itself.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/harness.h"
#include "bench/membw.h"
#include "bench/subprocess.h"
#include "bench/svg_chart.h"
#include "checkpoint/safetensors.h"
#include "cli/command.h"
#include "core/files.h"
#include "io/probe.h"
#include "model/config.h"
#include "store/manifest.h"

namespace deltafin::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

struct BenchOptions {
  std::string model_dir, store;
  std::string prompt, prompt_ids;
  bool chat = false;
  int max_new = 16, reps = 4, warmup = 1;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  int queue_depth = 4;  // the run default (store_run.h)
  std::vector<std::string> arms;
  std::string flags;  // common to every arm
  std::string out;
  bool probe = true;
  double probe_seconds = 2.0;
  size_t membw_mib = 512;
  bool drop_cache = false;
  bool probe_each_run = true;
};

// The files a disk probe reads, per drive, and the span it reads: the store's
// packs, or the checkpoint's shards (one "drive").
struct ProbeTargets {
  std::vector<std::string> roots;
  std::vector<std::vector<std::string>> files;
  uint64_t block = 0;
};

Result<ProbeTargets> probe_targets(const BenchOptions& o) {
  ProbeTargets t;
  if (!o.store.empty()) {
    DF_ASSIGN(Manifest man, Manifest::load(o.store));
    t.block = man.span_bytes;
    for (size_t d = 0; d < man.drives.size(); ++d) {
      t.roots.push_back(man.drives[d].root);
      t.files.emplace_back();
      for (size_t p = 0; p < man.drives[d].packs.size(); ++p) t.files.back().push_back(man.pack_path(int(d), p));
    }
    return t;
  }
  DF_ASSIGN(auto ck, Checkpoint::open(o.model_dir));
  DF_ASSIGN(ModelConfig cfg, ModelConfig::from_json(ck->config()));
  t.block = (cfg.expert_bytes() + 4095) / 4096 * 4096;
  t.roots.push_back(o.model_dir);
  t.files.emplace_back();
  for (const auto& s : ck->shards()) t.files.back().push_back(s->path());
  return t;
}

Result<std::vector<bench::DiskProbe>> probe_disks(const ProbeTargets& t, const BenchOptions& o) {
  std::vector<bench::DiskProbe> out;
  for (size_t d = 0; d < t.roots.size(); ++d) {
    if (t.files[d].empty()) continue;
    DF_ASSIGN(io::ProbeResult pr, io::probe_files(t.files[d], t.block, o.queue_depth, 64ull << 30, o.probe_seconds, 11 + d));
    out.push_back({t.roots[d], fmt::format("{}, random {} KiB reads at QD {} into {} MiB", pr.mode(), t.block / 1024,
                                             o.queue_depth, pr.footprint >> 20),
                   pr.mb_s});
  }
  return out;
}

// Asks the kernel to drop a checkpoint's cached pages, so a --model run starts cold.
void drop_page_cache(const ProbeTargets& t) {
  for (const auto& files : t.files)
    for (const auto& f : files) {
      int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
}

std::string now_stamp() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::gmtime(&t));
  return buf;
}

int bench_main(const BenchOptions& o) {
  if (o.model_dir.empty() == o.store.empty()) return fail("give one of --model DIR or --store STORE");
  if (o.prompt.empty() == o.prompt_ids.empty()) return fail("give one of --prompt TEXT or --prompt-ids 1,2,3");
  std::vector<bench::Arm> arms;
  for (const auto& spec : o.arms) {
    auto a = bench::parse_arm(spec);
    if (!a.ok()) return fail(a.message());
    for (const auto& b : arms)
      if (b.name == a->name) return fail(fmt::format("--arm {}: named twice", a->name));
    arms.push_back(std::move(a.value()));
  }
  if (arms.empty()) arms.push_back({"default", {}});
  auto common = bench::split_flags(o.flags);
  if (!common.ok()) return fail(common.message());
  auto exe = bench::self_executable();
  if (!exe.ok()) return fail(exe.message());

  const std::string out = o.out.empty() ? "bench-results/" + now_stamp() : o.out;
  std::error_code ec;
  fs::create_directories(fs::path(out) / "runs", ec);
  if (ec) return fail(fmt::format("{}: cannot create: {}", out, ec.message()));
  std::ofstream log(fs::path(out) / "runs.jsonl");
  if (!log) return fail(fmt::format("{}/runs.jsonl: cannot open for writing", out));

  auto targets = probe_targets(o);
  if (!targets.ok()) return fail(targets.message());
  bench::Limits limits;
  if (o.probe) {
    ThreadPool pool(o.threads);
    const auto bw = bench::measure_read_bandwidth(o.membw_mib << 20, pool, 3);
    limits.membw_gb_s = bw.bytes_per_s / 1e9;
    std::fprintf(stderr, "memory bandwidth probe: %.1f GB/s\n", limits.membw_gb_s);
    auto d = probe_disks(*targets, o);
    if (!d.ok()) return fail(d.message());
    limits.disk_before = *d;
    for (const auto& p : limits.disk_before) std::fprintf(stderr, "disk probe %s: %.0f MB/s (%s)\n", p.root.c_str(), p.mb_s, p.mode.c_str());
  }

  // The argv of one run of an arm.
  auto argv_for = [&](const bench::Arm& arm, const std::string& stats_path) {
    std::vector<std::string> v = {*exe, "run"};
    bool own_source = false;
    for (const auto& f : arm.flags) own_source = own_source || f == "--model" || f == "--store";
    if (!own_source) {
      v.push_back(o.store.empty() ? "--model" : "--store");
      v.push_back(o.store.empty() ? o.model_dir : o.store);
    }
    if (!o.prompt.empty()) v.insert(v.end(), {"--prompt", o.prompt});
    if (!o.prompt_ids.empty()) v.insert(v.end(), {"--prompt-ids", o.prompt_ids});
    if (o.chat) v.push_back("--chat");
    v.insert(v.end(), {"--max-new", std::to_string(o.max_new), "--threads", std::to_string(o.threads), "--print-ids",
                       "--stats-json", stats_path});
    if (!o.store.empty() || own_source) v.insert(v.end(), {"--queue-depth", std::to_string(o.queue_depth)});
    v.insert(v.end(), common->begin(), common->end());
    v.insert(v.end(), arm.flags.begin(), arm.flags.end());
    return v;
  };

  // Warm-up runs first (each arm, in order), then the balanced measured runs.
  struct Planned {
    int arm, rep;
    bool warmup;
  };
  std::vector<Planned> plan;
  for (int w = 0; w < o.warmup; ++w)
    for (int a = 0; a < int(arms.size()); ++a) plan.push_back({a, w, true});
  const std::vector<int> order = bench::balanced_order(int(arms.size()), o.reps);
  std::vector<int> reps_done(arms.size(), 0);
  for (int a : order) plan.push_back({a, reps_done[a]++, false});

  std::vector<int32_t> oracle;
  bool have_oracle = false;
  std::vector<std::vector<bench::RunRecord>> measured(arms.size());
  bench::Chart chart;
  chart.title = "decode tokens/s of every measured run, in run order";
  chart.xlabel = "run";
  chart.ylabel = "decode tok/s";
  for (const auto& a : arms) chart.series.push_back({a.name, {}});
  std::vector<std::string> rejection(arms.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    const bench::Arm& arm = arms[p.arm];
    const std::string stem = (fs::path(out) / "runs" / fmt::format("{:03d}-{}{}", i, arm.name, p.warmup ? "-warmup" : "")).string();
    if (o.drop_cache && !o.model_dir.empty()) drop_page_cache(*targets);
    const auto argv = argv_for(arm, stem + ".json");
    auto rc = bench::run_process(argv, stem + ".out", stem + ".err");
    if (!rc.ok()) return fail(rc.message());
    if (*rc != 0) {
      auto err = read_file(stem + ".err");
      return fail(fmt::format("arm {}: run {} exited with {}: {}", arm.name, i, *rc, err.ok() ? *err : "(no stderr)"));
    }
    auto text = read_file(stem + ".json");
    if (!text.ok()) return fail(text.message());
    auto rec = bench::RunRecord::from_json(*text, stem + ".json");
    if (!rec.ok()) return fail(rec.message());
    if (!have_oracle) oracle = rec->ids, have_oracle = true;
    const bench::OracleVerdict v = bench::check_oracle(oracle, rec->ids);
    if (!v.match && rejection[p.arm].empty())
      rejection[p.arm] = fmt::format("run {} differs from the oracle at token {}", i, v.first_difference);
    // The drive's rate right after this run: the yardstick for this run's roofline.
    if (o.probe && o.probe_each_run && !p.warmup) {
      auto d = probe_disks(*targets, o);
      if (!d.ok()) return fail(d.message());
      for (const auto& x : *d) rec->disk_probe_mb_s += x.mb_s;
    }
    if (!p.warmup) {
      measured[p.arm].push_back(*rec);
      chart.series[size_t(p.arm)].points.push_back({double(i + 1), rec->decode_tokens_per_s()});
    }
    json line = json::parse(rec->to_json());
    line["arm"] = arm.name, line["rep"] = p.rep, line["seq"] = i, line["warmup"] = p.warmup;
    line["oracle"] = v.match ? "ok" : fmt::format("mismatch at token {}", v.first_difference);
    line["decode_tok_s"] = rec->decode_tokens_per_s();
    line["prefill_read_amplification"] = rec->prefill_read_amplification();
    line["argv"] = argv;
    log << line.dump() << "\n" << std::flush;
    std::fprintf(stderr, "[%zu/%zu] %-12s %s ttft %.3f s, decode %.3f tok/s, %.1f MB read/token, oracle %s%s\n", i + 1,
                 plan.size(), arm.name.c_str(), p.warmup ? "warm-up" : fmt::format("rep {}", p.rep).c_str(), rec->ttft_s,
                 rec->decode_tokens_per_s(), rec->decode_read_bytes_per_token() / 1e6, v.match ? "ok" : "MISMATCH",
                 rec->disk_probe_mb_s > 0 ? fmt::format(", disk probe after {:.0f} MB/s", rec->disk_probe_mb_s).c_str() : "");
  }

  if (o.probe) {
    auto d = probe_disks(*targets, o);
    if (!d.ok()) return fail(d.message());
    limits.disk_after = *d;
  }
  std::vector<bench::ArmSummary> summary;
  json sj = {{"limits", {{"membw_gb_s", limits.membw_gb_s}, {"disk_mb_s", limits.disk_mb_s()}}}, {"arms", json::array()}};
  for (const auto& p : limits.disk_before) sj["limits"]["disk_before"].push_back({{"root", p.root}, {"mb_s", p.mb_s}, {"mode", p.mode}});
  for (const auto& p : limits.disk_after) sj["limits"]["disk_after"].push_back({{"root", p.root}, {"mb_s", p.mb_s}, {"mode", p.mode}});
  for (size_t a = 0; a < arms.size(); ++a) {
    bench::ArmSummary s = bench::summarize_arm(arms[a].name, measured[a], limits);
    s.rejected = !rejection[a].empty(), s.rejection = rejection[a];
    sj["arms"].push_back({{"name", s.name},
                          {"flags", arms[a].flags},
                          {"rejected", s.rejected},
                          {"rejection", s.rejection},
                          {"runs", s.runs},
                          {"cold", s.cold},
                          {"io_mode", s.io_mode},
                          {"ttft_s", {s.ttft_s.median, s.ttft_s.min, s.ttft_s.max}},
                          {"prefill_tok_s", {s.prefill_tok_s.median, s.prefill_tok_s.min, s.prefill_tok_s.max}},
                          {"decode_tok_s", {s.decode_tok_s.median, s.decode_tok_s.min, s.decode_tok_s.max}},
                          {"tokens_per_pass", s.tokens_per_pass},
                          {"decode_read_bytes_per_token", s.decode_read_bytes_per_token},
                          {"prefill_read_amplification", s.prefill_read_amplification},
                          {"read_wait_per_token_s", s.read_wait_per_token_s},
                          {"read_time_per_token_s", s.read_time_per_token_s},
                          {"cold_bytes_per_token", s.cold_bytes_per_token},
                          {"roofline", s.roofline},
                          {"roofline_session", s.roofline_session},
                          {"run_probe_mb_s", s.run_probe_mb_s},
                          {"engine_mb_s", s.engine_mb_s},
                          {"engine_vs_probe", s.engine_vs_probe}});
    summary.push_back(std::move(s));
  }
  // The disk's limit as a line: tok/s if every decode token's cold bytes came at the probed rate.
  if (limits.disk_mb_s() > 0 && !summary.empty() && summary[0].cold_bytes_per_token > 0) {
    const double limit = limits.disk_mb_s() * 1e6 / summary[0].cold_bytes_per_token;
    chart.series.push_back({"disk limit (probe)", {{1.0, limit}, {double(plan.size()), limit}}});
  }
  std::ofstream(fs::path(out) / "runs.svg") << bench::render_svg(chart);
  const std::string table = bench::format_summary(summary, limits);
  std::printf("%s", table.c_str());
  std::ofstream(fs::path(out) / "summary.txt") << table;
  std::ofstream(fs::path(out) / "summary.json") << sj.dump(2) << "\n";
  std::fprintf(stderr, "results in %s (runs.jsonl, summary.txt, summary.json, runs.svg)\n", out.c_str());
  for (const auto& s : summary)
    if (s.rejected) return 3;  // an arm changed the tokens
  return 0;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Benchmark arms of `run` flags against a token oracle, with disk and memory probes");
  set_example(cmd, "deltafin bench --model models/demo --prompt-ids 1,2,3,4 --max-new 32 --reps 2 --arm off= --arm 'ngram=--draft ngram' --out /tmp/bench-demo");
  auto* m = cmd->add_option("--model", o->model_dir, "Checkpoint directory");
  cmd->add_option("--store", o->store, "Model store")->excludes(m);
  auto* p = cmd->add_option("--prompt", o->prompt, "Prompt text");
  cmd->add_option("--prompt-ids", o->prompt_ids, "Prompt as comma-separated token ids")->excludes(p);
  cmd->add_flag("--chat", o->chat, "Render --prompt as a chat turn");
  cmd->add_option("--max-new", o->max_new, "Tokens to generate per run")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--reps", o->reps, "Measured runs per arm (even: balanced order)")->check(CLI::Range(1, 1000));
  cmd->add_option("--warmup", o->warmup, "Unmeasured runs per arm first")->check(CLI::Range(0, 100));
  cmd->add_option("--arm", o->arms, "NAME='FLAGS': an arm (repeatable); default one arm with no flags");
  cmd->add_option("--flags", o->flags, "Flags given to every run (e.g. '--prefill-chunk 512')");
  cmd->add_option("--threads", o->threads, "Compute threads per run (and the memory probe)")->check(CLI::Range(1, 1024));
  cmd->add_option("--queue-depth", o->queue_depth, "Store reads in flight per drive (runs and disk probe)")->check(CLI::Range(1, 1024));
  cmd->add_option("--out", o->out, "Result directory (default bench-results/<UTC time>)");
  cmd->add_flag("!--no-probe", o->probe, "Skip the disk and memory probes");
  cmd->add_option("--probe-seconds", o->probe_seconds, "Seconds per drive per disk probe")->check(CLI::Range(0.05, 600.0));
  cmd->add_flag("!--no-probe-each-run", o->probe_each_run, "Probe the drives only before and after all runs, not after each");
  cmd->add_option("--membw-mib", o->membw_mib, "Buffer of the memory-bandwidth probe")->check(CLI::Range(16, 1 << 16));
  cmd->add_flag("--drop-cache", o->drop_cache, "--model: drop the checkpoint's cached pages before each run (cold)");
  cmd->callback([o] { set_exit_code(bench_main(*o)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
