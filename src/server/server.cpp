#include "server/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

#include "server/anthropic.h"
#include "server/web_page.h"


namespace deltafin::server {

namespace {

using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

ApiError make_error(int status, std::string message, std::string type, std::string code) {
  return transport_error(status, std::move(message), std::move(code), std::move(type));
}

bool is_route(const std::string& path, const char* route) {
  return path == route || path == std::string("/v1") + route;
}

bool is_anthropic(const std::string& path) { return is_route(path, "/messages"); }

// An error in the shape the route's clients read: Anthropic's for /v1/messages.
HttpResponse error_for(const std::string& path, const ApiError& e, HeaderList headers = {}) {
  if (!is_anthropic(path)) return error_response(e, std::move(headers));
  return HttpResponse{e.status, "application/json", anthropic_error_body(e), std::move(headers)};
}

ApiError shutting_down() {
  return make_error(503, "the server is shutting down", "server_error", "server_shutting_down");
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

// One validated, tokenised request waiting for (or holding) the slot.
struct GenerationJob {
  std::shared_ptr<Exchange> ex;
  GenRequest request;
  std::vector<int32_t> ids;
  ResponseMeta meta;
  bool anthropic = false;  // POST /v1/messages: answered in Anthropic's shapes
  Clock::time_point enqueued = Clock::now();
  BoundedFifo<GenerationJob>::Ticket ticket{};
  // Set when the client leaves or the server stops: generation stops before the next layer.
  std::atomic<bool> cancel{false};
};

Result<bool> is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), "0", &hints, &res);
  if (rc != 0) return error("--host {}: {}", host, gai_strerror(rc));
  bool all = res != nullptr;
  for (addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      all = all && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      all = all && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      all = false;
    }
  }
  freeaddrinfo(res);
  return all;
}

Server::Server(Engine& engine, ServerOptions opt)
    : engine_(engine), opt_(std::move(opt)), memo_(opt_.memo_entries, opt_.memo_bytes), queue_(opt_.queue) {
  limits_.model_name = opt_.model_name;
  limits_.max_tokens = opt_.max_tokens;
  // Every rendered message carries at least its four control tokens
  // (<|open|>, <|sep|>, <|close|>, <|end_of_msg|>), so more messages than
  // context/4 can never fit: such bodies are refused before a tree is built.
  limits_.max_messages = size_t(std::max(1, engine_.options().max_context / 4));
  limits_.max_context = engine_.options().max_context;
  limits_.max_token_bytes = engine_.max_token_bytes();
  limits_.max_prompt_bytes = size_t(engine_.options().max_context) * engine_.max_token_bytes();
  TransportOptions t;
  t.host = opt_.host;
  t.port = opt_.port;
  t.max_body_bytes = opt_.max_request_bytes;
  t.max_connections = opt_.max_connections;
  t.max_client_connections = opt_.max_client_connections;
  t.head_timeout_ms = opt_.head_timeout_ms;
  t.body_idle_timeout_ms = opt_.body_idle_timeout_ms;
  t.send_timeout_ms = opt_.send_timeout_ms;
  t.stream_interval_ms = opt_.stream_interval_ms;
  t.io_threads = opt_.io_threads;
  transport_ = std::make_unique<HttpTransport>(t, static_cast<HttpHandler&>(*this));
}

Server::~Server() {
  transport_.reset();  // its last callbacks (request records) still reach this object's members
}

Status Server::bind() {
  DF_ASSIGN(const bool loopback, is_loopback_host(opt_.host));
  if (!loopback && opt_.api_key.empty())
    return error("--host {} is not a loopback address: refusing to serve it without --api-key", opt_.host);
  return transport_->bind();
}

Status Server::serve() {
  generation_thread_ = std::thread([this] { generation_loop(); });
  prepare_thread_ = std::thread([this] { prepare_loop(); });
  Status s = transport_->run();
  // Whatever is still waiting has been answered in on_stopping; nothing more joins.
  for (auto& j : queue_.close()) j->ex->respond(error_for(j->ex->request().path, shutting_down()));
  {
    std::lock_guard lock(prep_mu_);
    prep_closed_ = true;
  }
  prep_cv_.notify_all();
  prepare_thread_.join();
  generation_thread_.join();
  return s;
}

void Server::log(const std::string& line) const {
  if (opt_.log) {
    opt_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
}

bool Server::authorized(const HttpRequest& req) const {
  if (opt_.api_key.empty()) return true;
  // Authorization: Bearer KEY (OpenAI clients) or x-api-key: KEY (Anthropic clients).
  std::string_view key;
  if (const std::string* h = req.header("authorization"); h && h->size() >= 7 && h->substr(0, 7) == "Bearer ")
    key = std::string_view(*h).substr(7);
  else if (const std::string* x = req.header("x-api-key"))
    key = *x;
  else
    return false;
  // Compare digests in constant time: neither the length nor the content leaks.
  unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), a);
  SHA256(reinterpret_cast<const unsigned char*>(opt_.api_key.data()), opt_.api_key.size(), b);
  return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

std::string Server::next_id(RequestKind kind) {
  return fmt::format("{}-{:08x}{:012x}", kind == RequestKind::Chat ? "chatcmpl" : "cmpl",
                     uint32_t(std::time(nullptr)), seq_.fetch_add(1) & 0xffffffffffffull);
}

std::string Server::metrics_text() const {
  MetricsGauges g;
  g.queue_length = queue_.size();
  g.queue_capacity = queue_.capacity();
  {
    std::lock_guard lock(running_mu_);
    g.generation_running = running_ != nullptr;
  }
  const TransportStats t = transport_->stats();
  g.connections_open = t.open;
  g.connections_accepted = t.accepted;
  g.connections_reclaimed = t.reclaimed;
  g.connections_refused = t.refused;
  return metrics_.render(g);
}

// ---- Routing (transport threads, head only) -------------------------------

std::optional<HttpResponse> Server::on_head(const HttpRequest& req) {
  const std::string& path = req.path;
  const bool models = is_route(path, "/models");
  const bool model_item = path.starts_with("/v1/models/") || path.starts_with("/models/");
  const bool chat = is_route(path, "/chat/completions");
  const bool completions = is_route(path, "/completions");
  const bool messages = is_anthropic(path);
  const bool health = path == "/health";
  const bool metrics = path == "/metrics";
  const bool page = path == "/";
  if (!models && !model_item && !chat && !completions && !messages && !health && !metrics && !page)
    return error_response(make_error(404, fmt::format("unknown URL: {} {}", req.method, path), "invalid_request_error",
                                     "not_found"));
  const bool post = chat || completions || messages;
  const char* allowed = post ? "POST" : "GET";
  if (req.method != allowed)
    return error_for(path,
                     make_error(405, fmt::format("{} is not allowed on {}; use {}", req.method, path, allowed),
                                "invalid_request_error", "method_not_allowed"),
                     {{"Allow", allowed}});
  if (health) return HttpResponse{200, "application/json", R"({"status":"ok"})", {}};
  // The page holds nothing secret, so it needs no key; the API calls it makes do.
  if (page)
    return HttpResponse{200, "text/html; charset=utf-8", std::string(chat_page()),
                        {{"Cache-Control", "no-cache"},
                         {"X-Content-Type-Options", "nosniff"},
                         {"Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; "
                                                     "style-src 'unsafe-inline'; connect-src 'self'; "
                                                     "frame-ancestors 'none'"}}};
  if (!authorized(req)) {
    const bool given = req.header("authorization") != nullptr || req.header("x-api-key") != nullptr;
    return error_for(path,
                     make_error(401, given ? "incorrect API key provided"
                                           : "missing API key: send Authorization: Bearer KEY (or x-api-key: KEY)",
                                "invalid_request_error", "invalid_api_key"),
                     {{"WWW-Authenticate", "Bearer"}});
  }
  if (metrics) return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(), {}};
  if (models || model_item) {
    ojson card = {{"id", opt_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "deltafin"}};
    if (models) return HttpResponse{200, "application/json", dump_json({{"object", "list"}, {"data", ojson::array({card})}}), {}};
    const std::string id = path.substr(path.find("/models/") + 8);
    if (id == opt_.model_name) return HttpResponse{200, "application/json", dump_json(card), {}};
    ApiError e = make_error(404, fmt::format("the model '{}' does not exist", id), "invalid_request_error",
                            "model_not_found");
    e.param = "model";
    return error_response(e);
  }
  if (!req.content_length && !req.chunked)
    return error_for(path, make_error(411, "a request body with Content-Length (or chunked) is required",
                                     "invalid_request_error", "length_required"));
  return std::nullopt;  // read the body (the transport answers 413 over --max-request-bytes)
}

void Server::on_request(std::shared_ptr<Exchange> ex) {
  const std::string& path = ex->request().path;
  const RequestKind kind =
      is_route(path, "/chat/completions") || is_anthropic(path) ? RequestKind::Chat : RequestKind::Completion;
  post_prepare([this, ex = std::move(ex), kind] { prepare(ex, kind); });
}

void Server::on_done(const RequestRecord& r) {
  metrics_.count_request(r.status);
  log(fmt::format("deltafin serve: request id={} client={} method={} path={} status={}{}{} ms={:.1f}", r.id, r.client,
                  r.method, r.path, r.status, r.detail.empty() ? "" : " ", r.detail, r.seconds * 1e3));
}

void Server::on_stopping() {
  stopping_.store(true);
  for (auto& j : queue_.close()) {
    j->cancel.store(true);
    j->ex->respond(error_for(j->ex->request().path, shutting_down()));
  }
  std::lock_guard lock(running_mu_);
  if (running_) running_->cancel.store(true);
}

// ---- Prepare thread -------------------------------------------------------

void Server::post_prepare(std::function<void()> task) {
  {
    std::lock_guard lock(prep_mu_);
    prep_tasks_.push_back(std::move(task));
  }
  prep_cv_.notify_one();
}

void Server::prepare_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(prep_mu_);
      prep_cv_.wait(lock, [&] { return prep_closed_ || !prep_tasks_.empty(); });
      if (prep_tasks_.empty()) return;
      task = std::move(prep_tasks_.front());
      prep_tasks_.pop_front();
    }
    try {
      task();
    } catch (const std::exception& e) {
      log(fmt::format("deltafin serve: error while preparing a request: {}", e.what()));
    }
  }
}

void Server::replay_memo(Exchange& ex, const GenRequest& r, const ResponseMeta& meta, const MemoEntry& hit) {
  const Usage usage{hit.prompt_tokens, hit.completion_tokens, hit.prompt_tokens};
  HeaderList h = {{"x-deltafin-prefill-tokens", "0"},
                  {"x-deltafin-cached-tokens", std::to_string(hit.prompt_tokens)},
                  {"x-deltafin-memo", "hit"},
                  {"x-deltafin-queue-length", "0"},
                  {"x-deltafin-queue-wait-ms", "0"}};
  ex.set_log_detail(fmt::format("prompt_tokens={} completion_tokens={} memo=hit", hit.prompt_tokens,
                                hit.completion_tokens));
  if (!r.stream) {
    ex.respond(HttpResponse{200, "application/json", dump_json(full_response(meta, hit.deltas, hit.finish_reason, usage)),
                            std::move(h)});
    return;
  }
  h.insert(h.begin(), {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}, {"X-Content-Type-Options", "nosniff"}});
  std::string out = sse_opening(meta, r.include_usage);
  for (const Delta& d : hit.deltas) out += sse_delta(meta, d, r.include_usage);
  out += sse_finish(meta, hit.finish_reason, r.include_usage);
  if (r.include_usage) out += sse_usage(meta, usage);
  out += sse_done();
  ex.begin_stream(200, "text/event-stream; charset=utf-8", std::move(h));
  ex.write(std::move(out));  // one piece: never waits
  ex.end_stream();
}

// Validation, memo and tokenisation: everything that can refuse a request
// happens here, before it may wait for the slot.
void Server::prepare(const std::shared_ptr<Exchange>& ex, RequestKind kind) {
  if (stopping_.load()) return ex->respond(error_for(ex->request().path, shutting_down()));
  if (ex->gone()) return;
  const std::string& path = ex->request().path;
  const bool anthropic = is_anthropic(path);
  Validated v;
  {
    std::string body = ex->take_body();
    if (anthropic) {  // translated into the equivalent chat body, then validated as one
      auto chat = anthropic_to_chat(body);
      if (auto* e = std::get_if<ApiError>(&chat)) return ex->respond(error_for(path, *e));
      body = dump_json(std::get<nlohmann::ordered_json>(chat));
    }
    v = validate_request(kind, body, limits_);
  }  // the body is freed here: a large prompt is held once (in the request), not twice
  if (auto* e = std::get_if<ApiError>(&v)) return ex->respond(error_for(path, *e));
  auto job = std::make_shared<GenerationJob>();
  job->ex = ex;
  job->request = std::move(std::get<GenRequest>(v));
  const GenRequest& r = job->request;
  job->meta = ResponseMeta{kind, next_id(kind), opt_.model_name, int64_t(std::time(nullptr))};
  job->anthropic = anthropic;
  if (anthropic) {
    job->meta.id = "msg_" + job->meta.id.substr(job->meta.id.find('-') + 1);
    job->request.memo_key.clear();  // the memo keeps no stop sequence: Anthropic answers are not memoised
  }

  // Exact response memo: answered at once, without the queue or the model.
  if (auto hit = r.memo_key.empty() ? std::nullopt : memo_.find(r.memo_key)) {
    metrics_.memo_hits.fetch_add(1);
    return replay_memo(*ex, r, job->meta, *hit);
  }
  auto ids = engine_.encode(r);
  if (auto* e = std::get_if<ApiError>(&ids)) return ex->respond(error_for(path, *e));
  job->ids = std::move(std::get<std::vector<int32_t>>(ids));

  // The ticket is stored before the worker can pop the job (it reads it for the headers).
  auto ticket = queue_.push(job, [](GenerationJob& j, const auto& t) { j.ticket = t; });
  if (!ticket) {
    if (stopping_.load()) return ex->respond(error_for(path, shutting_down()));
    metrics_.queue_rejected.fetch_add(1);
    // A rough estimate: the mean generation time so far, once per waiting request and the running one.
    const double mean = metrics_.mean_generation_seconds();
    const int retry = int(std::clamp(std::ceil(mean * double(queue_.capacity() + 1)), 1.0, 3600.0));
    return ex->respond(error_for(path,
        make_error(429, fmt::format("the generation queue is full ({} waiting, --queue)", queue_.capacity()),
                   "server_busy", "server_busy"),
        {{"Retry-After", std::to_string(retry)}}));
  }
  // A client that leaves stops the job: out of the queue if it still waits,
  // else before the next layer of its generation.
  ex->on_gone([this, weak = std::weak_ptr<GenerationJob>(job)] {
    auto j = weak.lock();
    if (!j) return;
    j->cancel.store(true);
    if (queue_.remove(j.get())) metrics_.queue_abandoned.fetch_add(1);
  });
}

// ---- Generation thread ----------------------------------------------------

void Server::generation_loop() {
  while (auto job = queue_.pop()) {
    {
      std::lock_guard lock(running_mu_);
      if (stopping_.load()) job->cancel.store(true);
      running_ = job.get();
    }
    try {
      run_job(*job);
    } catch (const std::exception& e) {
      engine_.discard();
      log(fmt::format("deltafin serve: error id={} status=500: {}", job->ex->request().id, e.what()));
      job->ex->respond(error_response(make_error(500, fmt::format("internal error (request id {}); the server log has "
                                                                  "the details", job->ex->request().id),
                                                 "server_error", "server_error")));
    }
    std::lock_guard lock(running_mu_);
    running_ = nullptr;
  }
}

// A job leaves the queue: its wait goes to /metrics, and its queue stay to the response headers.
HeaderList Server::start_job(const GenerationJob& job, double waited) {
  metrics_.add_queue_wait(waited);
  return {{"x-deltafin-queue-length", std::to_string(job.ticket.ahead)},
          {"x-deltafin-queue-wait-ms", fmt::format("{:.0f}", waited * 1e3)},
          {"x-deltafin-queue-ticket", std::to_string(job.ticket.number)},
          {"x-deltafin-generation", std::to_string(++generations_served_)}};
}

// A finished generation's counts, for /metrics.
void Server::record(const GenerationOutcome& o) {
  metrics_.add_generation(o.prompt_tokens, o.prefill_tokens, o.cached_tokens, o.completion_tokens, o.prefill_seconds,
                          o.decode_seconds);
  metrics_.add_drafting(o.target_passes, o.draft_proposed, o.draft_accepted);
  metrics_.add_experts(o.expert_bytes, o.expert_wait_seconds);
}

// What the client is told when a generation did not finish: cancelled (only
// shutdown cancels a job whose client is still there), or failed. The full
// message may name server files: it goes to the log, the client gets the request id.
ApiError Server::generation_error(const Result<GenerationOutcome>& result, const std::string& id) {
  if (result.ok()) return shutting_down();
  log(fmt::format("deltafin serve: error id={} status=500: generation failed: {}", id, result.message()));
  return make_error(500, fmt::format("generation failed (request id {}); the server log has the details", id),
                    "server_error", "server_error");
}

void Server::run_job(GenerationJob& job) {
  Exchange& ex = *job.ex;
  if (job.cancel.load() || ex.gone()) {
    if (!ex.gone()) ex.respond(error_for(ex.request().path, shutting_down()));
    return;
  }
  if (job.anthropic) return run_anthropic(job);
  const GenRequest& r = job.request;
  const bool chat = r.kind == RequestKind::Chat;
  const double waited = seconds_since(job.enqueued);
  const HeaderList queue_headers = start_job(job, waited);
  auto stream_headers = [&](int64_t prefill, int64_t cached) {
    HeaderList h = {{"Cache-Control", "no-cache"},
                    {"X-Accel-Buffering", "no"},
                    {"X-Content-Type-Options", "nosniff"},
                    {"x-deltafin-prefill-tokens", std::to_string(prefill)},
                    {"x-deltafin-cached-tokens", std::to_string(cached)},
                    {"x-deltafin-memo", "miss"}};
    h.insert(h.end(), queue_headers.begin(), queue_headers.end());
    return h;
  };
  const std::string& id = ex.request().id;

  // n > 1: the choices run one after another, choice i with seed + i
  // (choice 0 is the n = 1 answer); a stream interleaves nothing, it sends
  // choice 0's chunks, then choice 1's, each with its index.
  bool streaming = false;
  std::vector<GenerationOutcome> outcomes;
  for (int c = 0; c < r.n; ++c) {
    ResponseMeta meta = job.meta;
    meta.choice = c;
    auto on_start = [&](int64_t prefill, int64_t cached) {
      if (!r.stream || c > 0) return;
      ex.begin_stream(200, "text/event-stream; charset=utf-8", stream_headers(prefill, cached));
      streaming = ex.write(sse_opening(meta, r.include_usage));
    };
    // Streamed log probabilities ride on the next chunk (a token may show no text yet).
    std::vector<TokenLogprob> pending_lp;
    bool first = true;  // the first token goes out at once (time to first token); later ones may batch
    auto sink = [&](const std::vector<Delta>& step, std::span<const TokenLogprob> lp) {
      if (ex.gone() || job.cancel.load()) return false;
      if (!r.stream) return true;
      pending_lp.insert(pending_lp.end(), lp.begin(), lp.end());
      std::string out;
      for (const Delta& d : step) {
        const std::span<const TokenLogprob> carried(pending_lp);
        out += sse_delta(meta, d, r.include_usage, r.logprobs ? &carried : nullptr);
        pending_lp.clear();
      }
      return out.empty() || ex.write(std::move(out), std::exchange(first, false));
    };
    if (c > 0 && streaming) ex.write(sse_opening(meta, r.include_usage));  // each chat choice opens with its role
    auto result = engine_.generate(r, job.ids, on_start, sink, &job.cancel, c);

    if (!result.ok() || result->cancelled) {
      engine_.discard();
      if (result.ok()) metrics_.cancelled.fetch_add(1);
      if (ex.gone()) return;  // the client left: nobody to answer
      const ApiError e = generation_error(result, id);
      if (r.stream) {
        if (!streaming) ex.begin_stream(200, "text/event-stream; charset=utf-8", stream_headers(0, 0));
        ex.write(sse_error(e.message, e.type, e.code.value_or("server_error")) + sse_done());
        ex.end_stream();
      } else {
        ex.respond(error_response(e));
      }
      return;
    }
    record(*result);
    // The generation is complete: keep its state and memo entry whether or not
    // the last bytes reach the client (both only ever reproduce exact output).
    if (chat) engine_.publish();
    else engine_.discard();
    if (r.stream) {
      const std::span<const TokenLogprob> rest(pending_lp);
      ex.write(sse_finish(meta, result->finish_reason, r.include_usage, r.logprobs ? &rest : nullptr));
    }
    outcomes.push_back(std::move(result).value());
  }

  const GenerationOutcome& first = outcomes.front();
  int64_t completion_tokens = 0, passes = 0;
  for (const auto& o : outcomes) completion_tokens += o.completion_tokens, passes += o.target_passes;
  ex.set_log_detail(fmt::format("prompt_tokens={} prefill_tokens={} completion_tokens={} decode_passes={} "
                                "queue_ms={:.0f}{}",
                                first.prompt_tokens, first.prefill_tokens, completion_tokens, passes, waited * 1e3,
                                r.n > 1 ? fmt::format(" choices={}", r.n) : ""));
  if (!r.memo_key.empty())
    memo_.insert(r.memo_key, MemoEntry{first.deltas, first.finish_reason, first.prompt_tokens, first.completion_tokens});
  // The prompt is counted once, as OpenAI does; completion tokens are summed over the choices.
  const Usage usage{first.prompt_tokens, completion_tokens, first.cached_tokens};
  const Timings timings{first.prefill_tokens, first.completion_tokens, first.prefill_seconds, first.decode_seconds,
                  first.expert_bytes};
  if (r.stream) {
    std::string out = r.include_usage ? sse_usage(job.meta, usage, &timings) : "";
    out += sse_done();
    ex.write(std::move(out));
    ex.end_stream();
    return;
  }
  HeaderList h = {{"x-deltafin-prefill-tokens", std::to_string(first.prefill_tokens)},
                  {"x-deltafin-cached-tokens", std::to_string(first.cached_tokens)},
                  {"x-deltafin-memo", "miss"}};
  h.insert(h.end(), queue_headers.begin(), queue_headers.end());
  nlohmann::ordered_json body;
  for (int c = 0; c < r.n; ++c) {
    ResponseMeta meta = job.meta;
    meta.choice = c;
    const GenerationOutcome& o = outcomes[size_t(c)];
    const std::span<const TokenLogprob> all(o.logprobs);
    const Timings t{o.prefill_tokens, o.completion_tokens, o.prefill_seconds, o.decode_seconds, o.expert_bytes};
    auto one = full_response(meta, o.deltas, o.finish_reason, usage, r.logprobs ? &all : nullptr, &t);
    if (c == 0) body = std::move(one);
    else body["choices"].push_back(std::move(one["choices"][0]));
  }
  ex.respond(HttpResponse{200, "application/json", dump_json(body), std::move(h)});
}

// The Anthropic Messages API: the same generation, written as a message or
// its event stream (server/anthropic.h). One choice, no memo.
void Server::run_anthropic(GenerationJob& job) {
  Exchange& ex = *job.ex;
  const GenRequest& r = job.request;
  const std::string& path = ex.request().path;
  const double waited = seconds_since(job.enqueued);
  HeaderList base = start_job(job, waited);
  AnthropicStream stream;
  bool streaming = false;
  auto on_start = [&](int64_t prefill, int64_t cached) {
    if (!r.stream) return;
    HeaderList h = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"},
                    {"x-deltafin-prefill-tokens", std::to_string(prefill)},
                    {"x-deltafin-cached-tokens", std::to_string(cached)}};
    h.insert(h.end(), base.begin(), base.end());
    ex.begin_stream(200, "text/event-stream; charset=utf-8", std::move(h));
    streaming = ex.write(stream.start(job.meta.id, job.meta.model, prefill + cached));
  };
  bool first = true;  // as in run_job: the first token at once
  auto sink = [&](const std::vector<Delta>& step, std::span<const TokenLogprob>) {
    if (ex.gone() || job.cancel.load()) return false;
    if (!r.stream) return true;
    std::string out;
    for (const Delta& d : step) out += stream.push(d);
    return out.empty() || ex.write(std::move(out), std::exchange(first, false));
  };
  auto result = engine_.generate(r, job.ids, on_start, sink, &job.cancel);
  if (!result.ok() || result->cancelled) {
    engine_.discard();
    if (result.ok()) metrics_.cancelled.fetch_add(1);
    if (ex.gone()) return;
    const ApiError e = generation_error(result, ex.request().id);
    if (!r.stream) return ex.respond(error_for(path, e));
    if (!streaming) ex.begin_stream(200, "text/event-stream; charset=utf-8", {});
    ex.write(AnthropicStream::error(e));
    ex.end_stream();
    return;
  }
  const GenerationOutcome& o = *result;
  record(o);
  ex.set_log_detail(fmt::format("prompt_tokens={} prefill_tokens={} completion_tokens={} decode_passes={} "
                                "queue_ms={:.0f} api=anthropic",
                                o.prompt_tokens, o.prefill_tokens, o.completion_tokens, o.target_passes, waited * 1e3));
  engine_.publish();
  AnthropicOutcome a{job.meta.id, job.meta.model, o.finish_reason, o.stop_string, o.prompt_tokens, o.completion_tokens};
  if (r.stream) {
    ex.write(stream.finish(a));
    ex.end_stream();
    return;
  }
  base.push_back({"x-deltafin-prefill-tokens", std::to_string(o.prefill_tokens)});
  base.push_back({"x-deltafin-cached-tokens", std::to_string(o.cached_tokens)});
  ex.respond(HttpResponse{200, "application/json", dump_json(anthropic_message(a, o.deltas)), std::move(base)});
}

}  // namespace deltafin::server
