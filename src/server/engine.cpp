#include "server/engine.h"

#include <algorithm>

#include "generate/greedy.h"
#include "tokenizer/chat.h"

namespace deltafin::server {

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<Model> model, const std::string& tokenizer_dir,
                                               EngineOptions opt) {
  auto tok = tokenizer::Tokenizer::load_from_checkpoint_dir(tokenizer_dir);
  if (!tok.ok()) return tok.status().with_context("tokenizer");
  if (tok->vocab_size() > uint32_t(model->config().vocab))
    return error("{}: the tokenizer has {} ids but the model's vocabulary is {}", tokenizer_dir, tok->vocab_size(),
                 model->config().vocab);
  return std::make_unique<Engine>(std::move(model), std::move(tok).value(), opt);
}

std::variant<std::vector<int32_t>, ApiError> Engine::encode(const GenRequest& req) const {
  Result<std::vector<uint32_t>> ids = std::vector<uint32_t>{};
  if (req.kind == RequestKind::Chat) {
    tokenizer::ChatOptions co;
    co.thinking = req.thinking;
    co.thinking_effort = req.thinking_effort;
    ids = tokenizer::encode_chat(tok_, req.messages, co);
    if (!ids.ok()) return bad_request(ids.message(), "messages");
  } else {
    ids = tok_.encode(req.prompt, /*allow_special=*/false);
    if (!ids.ok()) return bad_request(ids.message(), "prompt");
  }
  if (ids->empty()) return bad_request("the prompt encodes to no tokens", req.kind == RequestKind::Chat ? "messages" : "prompt");
  const int64_t need = int64_t(ids->size()) + req.max_tokens;
  if (need > opt_.max_context) {
    ApiError e = bad_request(fmt::format("the prompt has {} tokens; with max_tokens {} that is {}, over this server's "
                                         "context limit of {}", ids->size(), req.max_tokens, need, opt_.max_context),
                             "messages", "context_length_exceeded");
    if (req.kind == RequestKind::Completion) e.param = "prompt";
    return e;
  }
  return std::vector<int32_t>(ids->begin(), ids->end());
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
                                           const StartCallback& on_start, const DeltaSink& sink) {
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

  DF_ASSIGN(OutputFilter filter, OutputFilter::create(tok_, chat, req.thinking));
  std::vector<int32_t> stop;
  if (chat) {
    DF_ASSIGN(auto s, tokenizer::chat_stop_ids(tok_));
    stop.assign(s.begin(), s.end());
  }
  GenerateOptions g;
  g.max_new = req.max_tokens;
  g.prefill_chunk = opt_.prefill_chunk;
  g.stop_ids = stop;
  const bool keep = chat && opt_.state_reuse;
  std::optional<Boundary> after_prompt;
  Status filter_status;
  std::vector<Delta> step;
  auto on_token = [&](int32_t tok, std::span<const float>) {
    if (keep && out.tokens.empty()) after_prompt = Boundary{ids, session};  // prompt boundary: a snapshot copy
    out.tokens.push_back(tok);
    step.clear();
    if (std::find(stop.begin(), stop.end(), tok) == stop.end()) {
      filter_status = filter.push(uint32_t(tok), step);
      if (!filter_status.ok()) return false;
    }
    out.deltas.insert(out.deltas.end(), step.begin(), step.end());
    if (!sink(step)) {
      out.cancelled = true;
      return false;
    }
    return true;
  };
  const std::span<const int32_t> rest(ids.data() + start, ids.size() - size_t(start));
  Status s = deltafin::generate(*model_, session, rest, g, on_token);
  DF_TRY(s);
  DF_TRY(filter_status);
  out.completion_tokens = int64_t(out.tokens.size());
  if (out.cancelled) return out;
  step.clear();
  DF_TRY(filter.finish(step));
  out.deltas.insert(out.deltas.end(), step.begin(), step.end());
  if (!step.empty() && !sink(step)) {
    out.cancelled = true;
    return out;
  }
  const bool stopped = !out.tokens.empty() && std::find(stop.begin(), stop.end(), out.tokens.back()) != stop.end();
  out.finish_reason = stopped ? "stop" : "length";
  if (keep) {
    if (after_prompt) pending_.push_back(std::move(*after_prompt));
    std::vector<int32_t> tape = ids;
    tape.insert(tape.end(), out.tokens.begin(), out.tokens.end());
    if (session.length + 1 == int64_t(tape.size())) pending_.push_back(Boundary{std::move(tape), std::move(session)});
  }
  return out;
}

}  // namespace deltafin::server
