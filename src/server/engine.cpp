#include "server/engine.h"

#include <algorithm>

#include "generate/greedy.h"
#include "generate/logprobs.h"
#include "server/chat_output.h"
#include "server/stop_strings.h"
#include "tokenizer/chat.h"

namespace deltafin::server {

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<Model> model, const std::string& tokenizer_dir,
                                               EngineOptions opt) {
  auto tok = tokenizer::Tokenizer::load_from_checkpoint_dir(tokenizer_dir);
  if (!tok.ok()) return tok.status().with_context("tokenizer");
  if (tok->vocab_size() > uint32_t(model->config().vocab))
    return error("{}: the tokenizer has {} ids but the model's vocabulary is {}", tokenizer_dir, tok->vocab_size(),
                 model->config().vocab);
  auto format = tokenizer::ChatFormat::from_checkpoint_dir(tokenizer_dir);
  if (!format.ok()) return format.status();
  auto engine = std::make_unique<Engine>(std::move(model), std::move(tok).value(), opt);
  engine->set_chat_format(std::move(format).value());
  return engine;
}

Engine::Engine(std::unique_ptr<Model> model, tokenizer::Tokenizer tok, EngineOptions opt)
    : model_(std::move(model)), tok_(std::move(tok)), opt_(opt) {
  for (uint32_t id = 0; id < tok_.rank_count(); ++id)
    if (auto b = tok_.token_bytes(id); b.ok()) max_token_bytes_ = std::max(max_token_bytes_, b->size());
}

std::variant<std::vector<int32_t>, ApiError> Engine::encode(const GenRequest& req) const {
  const bool chat = req.kind == RequestKind::Chat;
  const char* param = chat ? "messages" : "prompt";
  auto too_long = [&](const char* what, size_t n) {
    const int64_t need = int64_t(n) + req.max_tokens;
    return bad_request(fmt::format("the prompt has {}{} tokens; with max_tokens {} that is {}, over this server's "
                                   "context limit of {}", what, n, req.max_tokens, need, opt_.max_context),
                       param, "context_length_exceeded");
  };
  // Every control segment is at least one token, every ordinary one at least
  // ceil(bytes / longest token): a prompt over the bound by that count alone
  // is refused without tokenising it (a 100 MB prompt costs no token memory).
  const auto lower_bound = [&](size_t bytes) { return (bytes + max_token_bytes_ - 1) / max_token_bytes_; };
  Result<std::vector<uint32_t>> ids = std::vector<uint32_t>{};
  if (chat) {
    tokenizer::ChatOptions co;
    co.thinking = req.thinking;
    co.thinking_effort = req.thinking_effort;
    co.tools = req.tools;
    if (!req.tool_choice.empty()) co.tool_choice = req.tool_choice;
    auto segments = format_.render(tok_, req.messages, co);
    if (!segments.ok()) return bad_request(segments.message(), param);
    size_t at_least = 0;
    for (const auto& s : *segments) at_least += s.control ? 1 : lower_bound(s.text.size());
    if (int64_t(at_least) + req.max_tokens > opt_.max_context) return too_long("at least ", at_least);
    ids = tokenizer::encode_segments(tok_, *segments);
  } else {
    if (int64_t(lower_bound(req.prompt.size())) + req.max_tokens > opt_.max_context)
      return too_long("at least ", lower_bound(req.prompt.size()));
    ids = tok_.encode(req.prompt, /*allow_special=*/false);
  }
  if (!ids.ok()) return bad_request(ids.message(), param);
  if (ids->empty()) return bad_request("the prompt encodes to no tokens", param);
  if (int64_t(ids->size()) + req.max_tokens > opt_.max_context) return too_long("", ids->size());
  return std::vector<int32_t>(ids->begin(), ids->end());
}

Status Engine::add_logprob(std::vector<TokenLogprob>& out, std::span<const float> logits, int32_t tok, int top,
                           int64_t& offset) const {
  const Logprobs lp = logprobs_of(logits, tok, top);
  auto text = [&](int32_t id) -> Result<std::string> {
    DF_ASSIGN(std::string_view b, tok_.token_bytes(uint32_t(id)));
    return std::string(b);
  };
  TokenLogprob e;
  DF_ASSIGN(e.text, text(tok));
  e.logprob = lp.chosen;
  e.text_offset = offset;
  offset += int64_t(e.text.size());
  for (const IdLogprob& a : lp.top) {
    // An id past the tokenizer's table (the model's vocabulary may be larger) is named by its number.
    auto t = text(a.id);
    e.top.push_back({t.ok() ? std::move(t).value() : fmt::format("<|id_{}|>", a.id), a.logprob});
  }
  out.push_back(std::move(e));
  return {};
}

void Engine::publish() {
  slot_ = std::move(pending_);
  pending_.clear();
}

void Engine::discard() {
  slot_.clear();
  pending_.clear();
}

Result<GenerationOutcome> Engine::generate(const GenRequest& req, const std::vector<int32_t>& ids,
                                           const StartCallback& on_start, const DeltaSink& sink,
                                           const std::atomic<bool>* cancel, int choice) {
  const bool chat = req.kind == RequestKind::Chat;
  std::vector<Boundary> slot = std::move(slot_);
  slot_.clear();
  pending_.clear();

  // The longest retained boundary whose tape the prompt strictly extends.
  Session session;
  bool reused = false;
  if (chat && opt_.state_reuse) {
    Boundary* best = nullptr;
    for (Boundary& b : slot)
      if (ids.size() > b.tape.size() && std::equal(b.tape.begin(), b.tape.end(), ids.begin()) &&
          (!best || b.session.length > best->session.length))
        best = &b;
    if (best) {
      session = std::move(best->session);
      reused = true;
    }
  }
  slot.clear();
  if (!reused) session = model_->new_session();

  GenerationOutcome out;
  const int64_t start = session.length;
  out.prompt_tokens = int64_t(ids.size());
  out.cached_tokens = start;
  out.prefill_tokens = out.prompt_tokens - start;
  if (on_start) on_start(out.prefill_tokens, out.cached_tokens);

  // With tools, the model's calls are parsed (ids: call_<generation>_<index>).
  const std::string call_ids = chat && !req.tools.is_null() ? fmt::format("call_{:x}_", ++generations_) : "";
  const bool thinking = chat ? format_.prompt_in_thinking(tok_, ids, req.thinking) : req.thinking;
  DF_ASSIGN(ChatOutput filter, ChatOutput::create(tok_, format_.family(), chat, thinking, call_ids));
  std::vector<int32_t> stop;
  if (chat) {
    DF_ASSIGN(auto s, format_.stop_ids(tok_));
    stop.assign(s.begin(), s.end());
  }
  GenerateOptions g;
  g.max_new = req.max_tokens;
  g.prefill_chunk = opt_.prefill_chunk;
  g.stop_ids = stop;
  g.cancel = cancel;
  SamplingParams sp = req.sampling;  // greedy unless the request samples
  sp.seed += uint64_t(choice);
  TokenPicker picker(sp);
  g.picker = &picker;
  const bool keep = chat && opt_.state_reuse;
  std::optional<Boundary> after_prompt;
  Status filter_status;
  StopMatcher stop_strings(req.stop);
  std::vector<Delta> step, shown;
  size_t logprobs_sent = 0;
  int64_t logprob_offset = 0;
  auto new_logprobs = [&] {
    const auto fresh = std::span<const TokenLogprob>(out.logprobs).subspan(logprobs_sent);
    logprobs_sent = out.logprobs.size();
    return fresh;
  };
  auto on_token = [&](int32_t tok, std::span<const float> logits) {
    if (keep && out.tokens.empty()) after_prompt = Boundary{ids, session};  // prompt boundary: a snapshot copy
    out.tokens.push_back(tok);
    step.clear();
    shown.clear();
    const bool is_stop_id = std::find(stop.begin(), stop.end(), tok) != stop.end();
    if (!is_stop_id) {
      filter_status = filter.push(uint32_t(tok), step);
      if (!filter_status.ok()) return false;
      if (req.logprobs) {
        filter_status = add_logprob(out.logprobs, logits, tok, req.top_logprobs, logprob_offset);
        if (!filter_status.ok()) return false;
      }
    }
    const bool hit = stop_strings.push(step, shown);
    out.deltas.insert(out.deltas.end(), shown.begin(), shown.end());
    if (!sink(shown, new_logprobs())) {
      out.cancelled = true;
      return false;
    }
    return !hit;
  };
  const std::span<const int32_t> rest(ids.data() + start, ids.size() - size_t(start));
  GenerateStats stats;
  Status s;
  if (drafter_) {
    DraftOptions dopt;
    dopt.policy = opt_.draft;
    dopt.max_context = opt_.max_context;
    dopt.committed = std::span<const int32_t>(ids.data(), size_t(start));
    DraftStats ds;
    s = generate_drafted(*model_, session, rest, g, drafter_.get(), dopt, on_token, &stats, &ds);
    out.target_passes = ds.target_passes();
    out.draft_proposed = ds.proposed, out.draft_accepted = ds.accepted;
  } else {
    s = deltafin::generate(*model_, session, rest, g, on_token, &stats);
    out.target_passes = std::max<int64_t>(stats.generated_tokens - 1, 0);
  }
  out.prefill_seconds = stats.prefill_seconds;
  out.decode_seconds = stats.decode_seconds;
  out.expert_bytes = stats.forward.expert_bytes;
  out.expert_wait_seconds = stats.forward.seconds_expert_wait;
  if (s.is_cancelled()) {
    out.cancelled = true;
    out.completion_tokens = int64_t(out.tokens.size());
    return out;
  }
  DF_TRY(s);
  DF_TRY(filter_status);
  out.completion_tokens = int64_t(out.tokens.size());
  if (out.cancelled) return out;
  step.clear();
  shown.clear();
  if (!stop_strings.stopped()) {
    DF_TRY(filter.finish(step));
    if (!stop_strings.push(step, shown)) stop_strings.finish(shown);
  }
  out.deltas.insert(out.deltas.end(), shown.begin(), shown.end());
  if (!shown.empty() && !sink(shown, new_logprobs())) {
    out.cancelled = true;
    return out;
  }
  const bool stopped = stop_strings.stopped() ||
                       (!out.tokens.empty() && std::find(stop.begin(), stop.end(), out.tokens.back()) != stop.end());
  out.finish_reason = !stopped ? "length" : filter.tool_calls() > 0 ? "tool_calls" : "stop";
  if (stop_strings.stopped()) out.stop_string = stop_strings.matched_stop();
  if (keep) {
    if (after_prompt) pending_.push_back(std::move(*after_prompt));
    std::vector<int32_t> tape = ids;
    tape.insert(tape.end(), out.tokens.begin(), out.tokens.end());
    if (session.length + 1 == int64_t(tape.size())) pending_.push_back(Boundary{std::move(tape), std::move(session)});
  }
  return out;
}

}  // namespace deltafin::server
