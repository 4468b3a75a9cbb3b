// `deltafin serve`: the OpenAI-compatible server (docs/guide/serving.md).
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <unistd.h>

#include "cli/command.h"
#include "hub/expert_fetcher.h"
#include "generate/drafter_open.h"
#include "model/model.h"
#include "server/engine.h"
#include "server/server.h"
#include "store/manifest.h"
#include "store/store_run.h"

namespace deltafin::cli {

namespace {

struct ServeOptions {
  std::string model_dir;
  StoreRunOptions store;
  server::ServerOptions server;
  server::EngineOptions engine;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  bool no_state_reuse = false;
  std::string draft = "off";  // off | auto | ngram | DIR, as for run
  int draft_max = 7;
};

server::Server* g_server = nullptr;
std::atomic<int> g_signals{0};  // lock-free: safe in a signal handler

// The first SIGINT/SIGTERM stops gracefully (the generation in flight stops
// before its next layer); a second one exits at once.
extern "C" void on_stop_signal(int sig) {
  if (g_signals.fetch_add(1) > 0) _exit(128 + sig);
  if (g_server) g_server->stop();  // async-signal-safe: a flag and a pipe write
}

int serve(ServeOptions& o) {
  std::signal(SIGPIPE, SIG_IGN);
  if (o.server.api_key.empty())
    if (const char* k = std::getenv("DELTAFIN_API_KEY")) o.server.api_key = k;
  // Refuse an unsafe bind before spending time loading the model.
  auto loopback = server::is_loopback_host(o.server.host);
  if (!loopback.ok()) return fail(loopback.message());
  if (!*loopback && o.server.api_key.empty())
    return fail(fmt::format("--host {} is not a loopback address: refusing to serve it without --api-key", o.server.host));

  std::unique_ptr<Model> model;
  StoreExpertSource* store_source = nullptr;  // owned by the model, then by the engine
  std::string tokenizer_dir, source_dir;
  if (!o.store.store.empty()) {
    auto sm = open_store_model(o.store, o.threads);
    if (!sm.ok()) return fail(sm.message());
    for (const auto& w : sm->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::fprintf(stderr, "%s\n", sm->spine_line.c_str());
    if (!sm->tier_line.empty()) std::fprintf(stderr, "%s\n", sm->tier_line.c_str());
    if (!sm->stream_line.empty()) std::fprintf(stderr, "%s\n", sm->stream_line.c_str());
    if (sm->source) source_dir = sm->source->manifest().source_dir;
    store_source = sm->source;
    model = std::move(sm->model);
    tokenizer_dir = (std::filesystem::path(o.store.store) / kSpineDirName).string();
  } else {
    auto m = Model::open(o.model_dir, o.threads);
    if (!m.ok()) return fail(m.message());
    model = std::move(m).value();
    tokenizer_dir = o.model_dir;
  }
  o.engine.state_reuse = !o.no_state_reuse;
  o.engine.draft.draft_max = o.draft_max;
  auto drafter = open_drafter(o.draft, *model, drafter_candidates(o.model_dir, o.store.store, source_dir), o.threads);
  if (!drafter.ok()) return fail(drafter.message());
  for (const auto& w : drafter->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fprintf(stderr, "draft: %s\n", drafter->description.c_str());
  auto engine = server::Engine::create(std::move(model), tokenizer_dir, o.engine);
  if (!engine.ok()) return fail(engine.message());
  (*engine)->set_drafter(std::move(drafter->drafter));

  server::Server srv(**engine, o.server);
  if (Status s = srv.bind(); !s.ok()) return fail(s.message());
  g_server = &srv;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::printf("deltafin serve: model '%s' listening on http://%s:%d\n", o.server.model_name.c_str(),
              o.server.host.c_str(), srv.port());
  std::fflush(stdout);
  Status s = srv.serve();
  g_server = nullptr;
  if (store_source)
    if (Status hs = save_store_heat(*store_source, o.store); !hs.ok())
      std::fprintf(stderr, "warning: heat file not updated: %s\n", hs.message().c_str());
  if (!s.ok()) return fail(s.message());
  std::printf("deltafin serve: stopped\n");
  return 0;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (docs/guide/serving.md)");
  set_example(cmd, "deltafin serve --model models/demo --port 8000   # then open http://127.0.0.1:8000/");
  auto* model = cmd->add_option("--model", o->model_dir, "Checkpoint directory (published layout)");
  auto* store = add_store_run_options(cmd, o->store);
  o->store.remote = hub::open_expert_fetcher;  // a streamed store fetches experts on first use
  model->excludes(store);
  cmd->add_option("--host", o->server.host, "Address to bind; non-loopback needs --api-key")->capture_default_str();
  cmd->add_option("--port", o->server.port, "TCP port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--api-key", o->server.api_key, "Require Authorization: Bearer KEY (or env DELTAFIN_API_KEY)");
  cmd->add_option("--max-tokens", o->server.max_tokens, "Largest max_tokens a request may ask for (chat default)")
      ->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd->add_option("--max-context", o->engine.max_context, "Largest prompt + max_tokens")
      ->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd->add_option("--max-request-bytes", o->server.max_request_bytes, "Largest request body (413 above)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 30))->capture_default_str();
  cmd->add_option("--model-name", o->server.model_name, "Model id advertised and required in requests")
      ->capture_default_str();
  cmd->add_option("--memo-entries", o->server.memo_entries, "Exact response memo: entries (0 disables)")
      ->capture_default_str();
  cmd->add_option("--memo-bytes", o->server.memo_bytes, "Exact response memo: bytes (0 disables)")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 30))->capture_default_str();
  cmd->add_option("--queue", o->server.queue, "Generation requests that may wait for the slot (more get 429)")
      ->check(CLI::Range(0, 1 << 16))->capture_default_str();
  cmd->add_option("--max-connections", o->server.max_connections, "Open connections in all")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--max-client-connections", o->server.max_client_connections,
                  "Open connections per client address")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--head-timeout-ms", o->server.head_timeout_ms,
                  "Time to send a request head; also the keep-alive idle time")
      ->check(CLI::Range(1, 3600000))->capture_default_str();
  cmd->add_option("--body-timeout-ms", o->server.body_idle_timeout_ms, "Longest pause inside a request body")
      ->check(CLI::Range(1, 3600000))->capture_default_str();
  cmd->add_option("--send-timeout-ms", o->server.send_timeout_ms, "Longest wait for a client to take response bytes")
      ->check(CLI::Range(1, 3600000))->capture_default_str();
  cmd->add_option("--stream-interval-ms", o->server.stream_interval_ms,
                  "Streamed tokens that come sooner than this after the last send wait and go out together "
                  "(0: each at once; the first token is never held)")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_flag("--no-state-reuse", o->no_state_reuse, "Always prefill the whole conversation");
  cmd->add_option("--draft", o->draft,
                  "Drafting: off | auto (a drafter beside the model or in the store, else ngram) | ngram | DIR; "
                  "responses never change (docs/guide/drafting.md)")
      ->capture_default_str();
  cmd->add_option("--draft-max", o->draft_max, "Widest draft proposal (tokens)")->check(CLI::Range(1, 16));
  cmd->add_option("--threads", o->threads, "Compute threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--prefill-chunk", o->engine.prefill_chunk, "Prompt rows per forward block")
      ->check(CLI::Range(1, 1 << 16));
  cmd->callback([o, model, store] {
    if (model->count() == 0 && store->count() == 0) {
      set_exit_code(fail("give --model DIR or --store STORE"));
      return;
    }
    set_exit_code(serve(*o));
  });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
