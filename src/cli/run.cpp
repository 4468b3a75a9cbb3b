// `deltafin run`: greedy generation from a prompt, streamed as it is decided.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/run_record.h"
#include "hub/expert_fetcher.h"
#include "cli/chat_display.h"
#include "cli/command.h"
#include "cli/open_model.h"
#include "cli/sampling_options.h"
#include "cli/prompt_input.h"
#include "generate/drafter_open.h"
#include "generate/greedy.h"
#include "generate/speculative.h"
#include "model/model.h"
#include "server/chat_output.h"
#include "store/fs_util.h"
#include "store/store_run.h"

namespace deltafin::cli {

namespace {

struct RunOptions {
  std::string model_dir;
  PromptInput prompt;
  int max_new = 64;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  int prefill_chunk = 512;
  std::string dump_logits;
  std::string route_trace;
  std::string stats_json;
  bool stats = false;
  bool print_ids = false;
  bool raw = false;  // --chat: print the rendered stream (control tokens spelled) instead of reasoning and answer
  StoreRunOptions store;  // --store and its read options
  std::string draft = "off";  // off | auto | ngram | DIR (docs/guide/drafting.md)
  int draft_max = 7;
  std::string draft_gate = "on";  // off: never switch drafting off (measuring a drafter, not a default)
  SamplingParams sampling;        // greedy unless --temperature > 0 (generate/sampler.h)
};

void print_stats(const GenerateStats& s, const ModelConfig& cfg) {
  const auto& f = s.forward;
  const int64_t decode_steps = std::max<int64_t>(s.generated_tokens - 1, 0);
  std::fprintf(stderr, "\n--- stats ---\n");
  std::fprintf(stderr, "prefill: %lld tokens in %.3f s (%.2f tok/s)\n", (long long)s.prompt_tokens, s.prefill_seconds,
               s.prefill_seconds > 0 ? s.prompt_tokens / s.prefill_seconds : 0.0);
  std::fprintf(stderr, "decode:  %lld tokens in %.3f s (%.2f tok/s)\n", (long long)decode_steps, s.decode_seconds,
               s.decode_seconds > 0 ? decode_steps / s.decode_seconds : 0.0);
  std::fprintf(stderr, "time by layer kind: kda %.3f s, mla %.3f s, dense ffn %.3f s, moe %.3f s (expert acquire %.3f s), head %.3f s\n",
               f.seconds_kda, f.seconds_mla, f.seconds_dense, f.seconds_moe, f.seconds_expert_wait, f.seconds_head);
  const double rows = double(std::max<uint64_t>(f.rows, 1));
  std::fprintf(stderr, "experts: %llu acquired, %.3f MB touched, %.3f MB per row (cold upper bound %.3f MB per token)\n",
               (unsigned long long)f.experts_used, f.expert_bytes / 1e6, f.expert_bytes / 1e6 / rows,
               double(cfg.moe.top_k) * cfg.num_moe_layers() * cfg.expert_bytes() / 1e6);
  if (f.seconds_expert_products > 0)
    std::fprintf(stderr,
                 "expert compute: routed products %.3f thread-s (%.2f GB/s of expert bytes per thread), shared experts "
                 "%.3f s\n",
                 f.seconds_expert_products, f.expert_bytes / 1e9 / f.seconds_expert_products, f.seconds_shared);
}

// SIGINT: the first stops generation at the next prompt block or decode step
// (the stats gathered so far are printed, exit 130); a second exits at once.
volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) {
  if (g_interrupted) _exit(130);
  g_interrupted = 1;
  static const char kMsg[] = "\ninterrupted: stopping after this step (Ctrl-C again to exit now)\n";
  ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)n;
}

// Installs on_sigint for its lifetime (generation only: loading stays killable).
struct SigintGuard {
  struct sigaction old {};
  SigintGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
  }
  ~SigintGuard() { sigaction(SIGINT, &old, nullptr); }
};

void print_draft_stats(const DraftStats& d, const std::string& description) {
  std::fprintf(stderr, "draft: %s\n", description.c_str());
  if (d.drafter.empty()) return;
  std::string by_pos;
  for (size_t i = 0; i < d.proposed_at.size(); ++i)
    by_pos += fmt::format("{}{:.2f}", i ? " " : "",
                          d.proposed_at[i] ? double(i < d.accepted_at.size() ? d.accepted_at[i] : 0) / d.proposed_at[i] : 0.0);
  std::fprintf(stderr,
               "draft: %lld proposals (%lld ids, %lld empty asks), %lld accepted (%.1f%%); acceptance by position: %s\n",
               (long long)d.proposals, (long long)d.proposed, (long long)d.empty_proposals, (long long)d.accepted,
               d.proposed ? 100.0 * double(d.accepted) / double(d.proposed) : 0.0, by_pos.empty() ? "-" : by_pos.c_str());
  std::fprintf(stderr, "draft: %.2f tokens per target pass (%lld decode tokens in %lld verify + %lld plain passes)\n",
               d.tokens_per_pass(), (long long)d.decode_tokens, (long long)d.verify_passes, (long long)d.plain_passes);
  std::fprintf(stderr,
               "draft: time drafting %.3f s, verification %.3f s, rollback %.3f s (target replay) + %.3f s (drafter), plain "
               "steps %.3f s; baseline %.3f ms per plain token, credit %+.3f ms\n",
               d.seconds_draft, d.seconds_verify, d.seconds_commit, d.seconds_rollback, d.seconds_plain,
               d.baseline_s * 1e3, d.credit_s * 1e3);
  if (d.decode_tokens > 0)
    std::fprintf(stderr, "draft: routed expert bytes per emitted token %.3f MB (decode; a verify block's union counted once)\n",
                 double(d.decode_expert_bytes) / 1e6 / double(d.decode_tokens));
  for (const auto& f : d.fallbacks) std::fprintf(stderr, "draft: %s\n", f.c_str());
  if (d.switched_off)
    std::fprintf(stderr, "draft: switched off for this request after %lld tokens: %s\n", (long long)d.off_after_tokens,
                 d.off_reason.c_str());
}

// One JSON line per (position, layer): {"pos":P,"layer":L,"experts":[...]} in route order.
void write_route_trace(std::FILE* f, int64_t pos0, int layer, size_t rows, int k, std::span<const int> ids) {
  for (size_t r = 0; r < rows; ++r) {
    std::string line = fmt::format("{{\"pos\":{},\"layer\":{},\"experts\":[", pos0 + int64_t(r), layer);
    for (int i = 0; i < k; ++i) line += fmt::format("{}{}", i ? "," : "", ids[r * k + i]);
    line += "]}\n";
    std::fwrite(line.data(), 1, line.size(), f);
  }
}

// A prefetch guess: {"pos":P,"layer":L,"rows":T,"guess":[...]}, the experts read
// ahead for MoE layer L for the block of T rows from position P.
void write_guess_trace(std::FILE* f, int64_t pos0, int layer, size_t rows, std::span<const int> ids) {
  std::string line = fmt::format("{{\"pos\":{},\"layer\":{},\"rows\":{},\"guess\":[", pos0, layer, rows);
  for (size_t i = 0; i < ids.size(); ++i) line += fmt::format("{}{}", i ? "," : "", ids[i]);
  line += "]}\n";
  std::fwrite(line.data(), 1, line.size(), f);
}

// Expert bytes the source has fetched so far: read from the drives (store) or
// touched in the mapping (model).
uint64_t expert_bytes_read(const StoreModel& sm) {
  if (!sm.source) return sm.model->experts().stats().bytes_touched;
  uint64_t n = 0;
  for (const auto& d : sm.source->engine().stats().drives) n += d.bytes[0] + d.bytes[1];
  return n;
}

void describe_source(const StoreModel& sm, bench::RunRecord& rec) {
  const ModelConfig& cfg = sm.model->config();
  rec.source = sm.source ? "store" : "model";
  rec.unit_bytes = sm.source ? sm.source->manifest().span_bytes : cfg.expert_bytes();
  rec.cold_bytes_per_token = uint64_t(cfg.moe.top_k) * uint64_t(cfg.num_moe_layers()) * rec.unit_bytes;
  if (!sm.source) {
    rec.io_mode = "mmap", rec.cold = false;
    return;
  }
  rec.cold = true;
  const ExpertSourceStats es = sm.source->stats();
  rec.prefetch_issued = es.prefetch_issued;
  rec.prefetch_hits = es.prefetch_hits;
  rec.ram_tier_slots = es.ram_slots;
  rec.ram_hits = es.ram_hits;
  rec.ram_misses = es.ram_misses;
  for (const auto& d : sm.source->engine().stats().drives) {
    if (d.busy_seconds > 0) rec.engine_mb_s += double(d.bytes[0] + d.bytes[1]) / d.busy_seconds / 1e6;
    if (rec.io_mode.find(d.mode) == std::string::npos) rec.io_mode += (rec.io_mode.empty() ? "" : ",") + d.mode;
    if (d.mode.find("O_DIRECT") == std::string::npos) rec.cold = false;
  }
}

int run(const RunOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto load0 = Clock::now();
  auto sm_or = open_model_or_store(o.model_dir, o.store, o.threads);
  if (!sm_or.ok()) return fail(sm_or.message());
  StoreModel sm = std::move(sm_or.value());
  Model& model = *sm.model;
  const auto opened = Clock::now();
  // The drives' raw rate just before the run (and again after it, in the stats).
  std::vector<double> probe_before;
  if (o.stats && sm.source && o.store.probe) probe_before = probe_store_drives(*sm.source, o.store);
  const auto wall0 = Clock::now();
  bench::RunRecord rec;
  rec.load_s = std::chrono::duration<double>(opened - load0).count();
  auto prompt_or = resolve_prompt(o.prompt, model);
  if (!prompt_or.ok()) return fail(prompt_or.message());
  PromptTokens& prompt = prompt_or.value();

  std::FILE* dump = nullptr;
  if (!o.dump_logits.empty()) {
    dump = std::fopen(o.dump_logits.c_str(), "wb");
    if (!dump) return fail(fmt::format("{}: cannot open for writing", o.dump_logits));
  }
  std::FILE* trace = nullptr;
  if (!o.route_trace.empty()) {
    trace = std::fopen(o.route_trace.c_str(), "w");
    if (!trace) return fail(fmt::format("{}: cannot open for writing", o.route_trace));
  }
  // Distinct (layer, expert) pairs the prompt routes: the denominator of prefill read amplification.
  const int64_t prompt_len = int64_t(prompt.ids.size());
  const int experts = model.config().moe.num_experts;
  std::vector<char> prefill_routed;
  if (!o.stats_json.empty()) prefill_routed.assign(size_t(model.config().num_layers) * size_t(experts), 0);
  if (trace || !prefill_routed.empty())
    model.set_route_observer([&](int64_t pos0, int layer, size_t rows, int k, std::span<const int> ids) {
      if (trace) write_route_trace(trace, pos0, layer, rows, k, ids);
      for (size_t r = 0; r < rows && !prefill_routed.empty() && pos0 + int64_t(r) < prompt_len; ++r)
        for (int i = 0; i < k; ++i) prefill_routed[size_t(layer) * size_t(experts) + size_t(ids[r * k + i])] = 1;
    });
  if (trace)
    model.set_guess_observer([&](int64_t pos0, int layer, size_t rows, std::span<const int> ids) {
      write_guess_trace(trace, pos0, layer, rows, ids);
    });
  const std::string source_dir = sm.source ? sm.source->manifest().source_dir : "";
  auto choice_or = open_drafter(o.draft, model, drafter_candidates(o.model_dir, o.store.store, source_dir), o.threads);
  if (!choice_or.ok()) return fail(choice_or.message());
  DrafterChoice& choice = choice_or.value();
  for (const auto& w : choice.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  DraftOptions dopt;
  dopt.policy.draft_max = o.draft_max;
  if (o.draft_gate == "off") dopt.policy.economics = false, dopt.policy.backoff_max = 0;
  DraftStats dstats;
  Session session = model.new_session();
  GenerateOptions g;
  g.max_new = o.max_new;
  g.prefill_chunk = o.prefill_chunk;
  g.stop_ids = prompt.stop_ids;
  g.interrupted = [] { return g_interrupted != 0; };
  TokenPicker picker(o.sampling);
  g.picker = &picker;
  GenerateStats stats;
  bool write_failed = false;
  // --chat (unless --raw / --print-ids): the answer parsed into reasoning and
  // text, as the server does; control tokens are never printed.
  std::optional<server::ChatOutput> chat_filter;
  std::optional<ChatPrinter> chat_printer;
  Status chat_status;
  std::vector<server::Delta> deltas;
  if (prompt.chat && prompt.tokenizer && !o.raw && !o.print_ids) {
    const bool thinking = prompt.chat_format.prompt_in_thinking(*prompt.tokenizer, prompt.ids, /*thinking=*/true);
    auto f = server::ChatOutput::create(*prompt.tokenizer, prompt.chat_format.family(), /*chat=*/true, thinking);
    if (!f.ok()) return fail(f.message());
    chat_filter.emplace(std::move(f).value());
    chat_printer.emplace(stdout, /*terminal=*/false, /*show_thinking=*/true);
  }
  auto last = Clock::now();
  auto on_token = [&](int32_t tok, std::span<const float> logits) {
    const auto now = Clock::now();
    if (rec.ids.empty()) {
      rec.ttft_s = std::chrono::duration<double>(now - wall0).count();
      rec.prefill_read_bytes = expert_bytes_read(sm);
      rec.prefill_expert_wait_s = stats.forward.seconds_expert_wait;
      rec.prefill_read_s = model.experts().stats().read_seconds;
    } else {
      rec.step_s.push_back(std::chrono::duration<double>(now - last).count());
    }
    rec.ids.push_back(tok);
    if (dump && std::fwrite(logits.data(), sizeof(float), logits.size(), dump) != logits.size()) write_failed = true;
    if (o.print_ids || !prompt.detok) {
      std::printf("%d\n", tok);
    } else if (chat_filter) {
      deltas.clear();
      const bool stop = std::find(prompt.stop_ids.begin(), prompt.stop_ids.end(), tok) != prompt.stop_ids.end();
      if (!stop) chat_status = chat_filter->push(uint32_t(tok), deltas);
      if (!chat_status.ok()) return false;
      for (const auto& d : deltas) chat_printer->push(d);
    } else {
      std::string text = prompt.detok(tok);
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    std::fflush(stdout);
    last = Clock::now();  // printing is not part of the next step
    return !write_failed;
  };
  Status s;
  {
    SigintGuard sigint;
    s = choice.drafter
            ? generate_drafted(model, session, prompt.ids, g, choice.drafter.get(), dopt, on_token, &stats, &dstats)
            : generate(model, session, prompt.ids, g, on_token, &stats);
  }
  const bool interrupted = g_interrupted != 0;
  if (chat_filter && chat_status.ok()) {
    deltas.clear();
    chat_status = chat_filter->finish(deltas);
    for (const auto& d : deltas) chat_printer->push(d);
    chat_printer->finish();
  } else if (prompt.detok && !o.print_ids) {
    std::string rest = prompt.detok(-1);  // flush held-back bytes
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
  }
  if (dump && std::fclose(dump) != 0) write_failed = true;
  if (trace && std::fclose(trace) != 0) return fail(fmt::format("{}: write failed", o.route_trace));
  if (!s.ok()) return fail(s.message());
  if (!chat_status.ok()) return fail(chat_status.message());
  if (write_failed) return fail(fmt::format("{}: write failed", o.dump_logits));
  model.set_route_observer({});
  model.set_guess_observer({});
  if (sm.source)
    if (Status hs = save_store_heat(*sm.source, o.store); !hs.ok())
      std::fprintf(stderr, "warning: heat file not updated: %s\n", hs.message().c_str());
  if (interrupted)
    std::fprintf(stderr, "interrupted: %lld of %lld prompt tokens and %lld generated tokens done\n",
                 (long long)stats.prompt_tokens, (long long)prompt_len, (long long)stats.generated_tokens);
  if (o.stats) {
    print_stats(stats, model.config());
    print_draft_stats(dstats, choice.description);
  }
  if (!o.stats_json.empty()) {
    describe_source(sm, rec);
    rec.threads = o.threads, rec.prefill_chunk = o.prefill_chunk;
    rec.prompt_tokens = prompt_len;
    rec.prefill_s = stats.prefill_seconds;
    if (rec.ids.empty()) {
      rec.prefill_read_bytes = expert_bytes_read(sm);
      rec.prefill_expert_wait_s = stats.forward.seconds_expert_wait;
      rec.prefill_read_s = model.experts().stats().read_seconds;
    }
    rec.decode_read_s = model.experts().stats().read_seconds - rec.prefill_read_s;
    rec.decode_expert_wait_s = stats.forward.seconds_expert_wait - rec.prefill_expert_wait_s;
    rec.decode_read_bytes = expert_bytes_read(sm) - rec.prefill_read_bytes;
    for (char c : prefill_routed) rec.prefill_distinct_experts += uint64_t(c);
    rec.draft = choice.description;
    rec.decode_tokens = choice.drafter ? dstats.decode_tokens : std::max<int64_t>(stats.generated_tokens - 1, 0);
    rec.target_passes = choice.drafter ? dstats.target_passes() : rec.decode_tokens;
    rec.draft_proposed = dstats.proposed, rec.draft_accepted = dstats.accepted;
    rec.draft_switched_off = dstats.switched_off;
    Status w = write_file_atomic(o.stats_json, rec.to_json() + "\n");
    if (!w.ok()) return fail(w.message());
  }
  if (o.stats && sm.source) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    std::fprintf(stderr, "%s\n", spine_check_line(sm, o.store).c_str());
    for (const auto& line : store_stats_lines(*sm.source, o.store, wall, stats.forward.seconds_expert_wait, probe_before,
                                                sm.model->guess_stats()))
      std::fprintf(stderr, "%s\n", line.c_str());
  }
  return interrupted ? 130 : 0;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Generate from a prompt (greedy, or seeded sampling)");
  set_example(cmd, "deltafin run --model models/demo --prompt 'def fibonacci(n):' --max-new 40 --stats");
  auto* model_opt = cmd->add_option("--model", o->model_dir, "Checkpoint directory (published layout)");
  model_opt->excludes(add_store_run_options(cmd, o->store));
  o->store.remote = hub::open_expert_fetcher;  // a streamed store fetches experts on first use
  add_prompt_options(cmd, o->prompt);
  cmd->add_option("--max-new", o->max_new, "Tokens to generate")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--threads", o->threads, "Compute threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--prefill-chunk", o->prefill_chunk, "Prompt rows per forward block")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--dump-logits", o->dump_logits, "Write each decided step's fp32 logits (raw little-endian)");
  cmd->add_option("--route-trace", o->route_trace,
                  "Record each MoE layer's routed experts per token (JSON lines: pos, layer, experts) and, with "
                  "--prefetch, each next-layer guess (pos, layer, rows, guess); `deltafin trace-stats` reads it");
  cmd->add_flag("--stats", o->stats, "Print timing and expert traffic to stderr");
  cmd->add_option("--stats-json", o->stats_json,
                  "Write this run's measurements (ids, TTFT, step times, expert bytes by phase) as one JSON object");
  cmd->add_flag("--print-ids", o->print_ids, "Print token ids, one per line, instead of text");
  cmd->add_flag("--raw", o->raw,
                "With --chat: print the rendered token stream (control tokens spelled out) instead of the reasoning "
                "and the answer as text");
  cmd->add_option("--draft", o->draft,
                  "Drafting: off | auto (a drafter beside the model or in the store, else ngram) | ngram | DIR "
                  "(a draft checkpoint: K3 layout or DSpark layout); tokens never change (docs/guide/drafting.md)");
  cmd->add_option("--draft-max", o->draft_max, "Widest draft proposal (tokens)")->check(CLI::Range(1, 16));
  cmd->add_option("--draft-gate", o->draft_gate,
                  "on: drafting switches itself off when it does not pay (default); off: always draft, no back-off "
                  "(to measure a drafter)")
      ->check(CLI::IsMember({"on", "off"}));
  add_sampling_options(cmd, o->sampling);
  cmd->callback([o] { set_exit_code(run(*o)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
