// `deltafin bench-verify (--model DIR | --store S) --prompt-ids 1,2,3 [--max-k 8] [--blocks N] [--plain N]`:
// the verification cost curve. One process: the prompt is prefilled, `plain`
// plain steps are timed (one row each) and give the target's own
// continuation; then for k = 1..max-k, `blocks` verification blocks of k+1
// rows are run from the same starting state with a replay drafter (the known
// continuation: every draft accepted, every row committed). For each k it
// prints the time and the routed expert bytes of one block divided by those
// of one plain step. A benchmark tool: replaying a known continuation is
// never a drafter anyone decodes with (docs/guide/drafting.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/command.h"
#include "hub/expert_fetcher.h"
#include "cli/prompt_input.h"
#include "generate/greedy.h"
#include "model/model.h"
#include "store/store_run.h"

namespace deltafin::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model_dir, ids;
  StoreRunOptions store;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  int max_k = 8, blocks = 3, plain = 6;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int run(const Options& o) {
  StoreModel sm;
  if (!o.store.store.empty()) {
    StoreRunOptions so = o.store;
    so.remote = hub::open_expert_fetcher;  // a streamed store fetches experts on first use
    auto r = open_store_model(so, o.threads);
    if (!r.ok()) return fail(r.message());
    sm = std::move(r.value());
  } else {
    if (o.model_dir.empty()) return fail("give --model DIR or --store STORE");
    auto r = Model::open(o.model_dir, o.threads);
    if (!r.ok()) return fail(r.message());
    sm.model = std::move(r.value());
  }
  Model& m = *sm.model;
  auto prompt = parse_id_list(o.ids);
  if (!prompt.ok()) return fail(prompt.message());
  if (prompt->empty()) return fail("--prompt-ids: no ids");
  Session start = m.new_session();
  std::vector<float> logits;
  if (Status s = m.forward(*prompt, start, Logits::LastRow, &logits); !s.ok()) return fail(s.message());
  // The continuation, timed one plain step at a time.
  const size_t need = size_t(o.max_k + 1) * size_t(o.blocks);
  std::vector<int32_t> cont = {argmax_lowest(logits)};
  std::vector<double> plain_s, plain_bytes;
  Session s = start;
  while (cont.size() < need + 1 || plain_s.size() < size_t(o.plain)) {
    ForwardStats fs;
    const auto t0 = Clock::now();
    const int32_t tok = cont.back();
    if (Status st = m.forward(std::span<const int32_t>(&tok, 1), s, Logits::LastRow, &logits, &fs); !st.ok())
      return fail(st.message());
    plain_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    plain_bytes.push_back(double(fs.expert_bytes));
    cont.push_back(argmax_lowest(logits));
  }
  const double t1 = median(plain_s), b1 = median(plain_bytes);
  std::printf("plain step: %.4f s, %.1f MB of routed experts (median of %zu)\n", t1, b1 / 1e6, plain_s.size());
  std::printf("%3s %10s %10s %12s %12s  %s\n", "k", "block s", "time/plain", "block MB", "bytes/plain",
              "committed ids check");
  for (int k = 1; k <= o.max_k; ++k) {
    Session v = start;
    std::vector<double> ts, bs;
    size_t at = 0;
    bool same = true;
    for (int b = 0; b < o.blocks; ++b) {
      std::span<const int32_t> block(cont.data() + at, size_t(k) + 1);  // [pending, the next k tokens]
      ForwardStats fs;
      const auto t0 = Clock::now();
      if (Status st = m.verify(block, v, &logits, &fs); !st.ok()) return fail(st.message());
      if (Status st = m.commit_verified(v, block.size()); !st.ok()) return fail(st.message());
      ts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      bs.push_back(double(fs.expert_bytes));
      const size_t V = size_t(m.config().vocab);
      for (size_t r = 0; r + 1 < block.size(); ++r)
        same = same && argmax_lowest(std::span<const float>(logits).subspan(r * V, V)) == block[r + 1];
      at += block.size();
    }
    const double t = median(ts), by = median(bs);
    std::printf("%3d %10.4f %10.3f %12.1f %12.3f  %s\n", k, t, t / t1, by / 1e6, by / b1,
                same ? "replayed drafts all accepted" : "MISMATCH");
  }
  return 0;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("bench-verify", "Verification cost: a block of k+1 rows vs one plain step, k = 1..N");
  set_example(cmd, "deltafin bench-verify --model models/demo --prompt-ids 1,2,3,4,5,6,7,8 --max-k 4");
  auto* model_opt = cmd->add_option("--model", o->model_dir, "Checkpoint directory");
  model_opt->excludes(add_store_run_options(cmd, o->store));
  cmd->add_option("--prompt-ids", o->ids, "Prompt token ids, comma-separated")->required();
  cmd->add_option("--threads", o->threads, "Compute threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-k", o->max_k, "Largest number of drafts per block")->check(CLI::Range(1, 16));
  cmd->add_option("--blocks", o->blocks, "Blocks timed per k")->check(CLI::Range(1, 64));
  cmd->add_option("--plain", o->plain, "Plain steps timed (at least)")->check(CLI::Range(1, 1024));
  cmd->callback([o] { set_exit_code(run(*o)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
