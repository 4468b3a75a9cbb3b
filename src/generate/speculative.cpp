#include "generate/speculative.h"

#include <algorithm>
#include <chrono>

namespace deltafin {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool is_stop(std::span<const int32_t> stop_ids, int32_t tok) {
  return std::find(stop_ids.begin(), stop_ids.end(), tok) != stop_ids.end();
}

// The request's emission: every decided token goes through emit(), which
// applies the stops exactly as generate() does and says whether to go on.
class Emitter {
 public:
  Emitter(const GenerateOptions& opt, const TokenCallback& cb, GenerateStats& st, std::vector<int32_t>& history)
      : opt_(opt), cb_(cb), st_(st), history_(history) {}
  bool emit(int32_t tok, std::span<const float> logits) {
    st_.generated_tokens++;
    history_.push_back(tok);
    if (opt_.picker) opt_.picker->accept(tok);
    ++emitted_;
    const bool go = cb_(tok, logits);
    return go && !is_stop(opt_.stop_ids, tok) && emitted_ < opt_.max_new;
  }
  int remaining() const { return opt_.max_new - emitted_; }

 private:
  const GenerateOptions& opt_;
  const TokenCallback& cb_;
  GenerateStats& st_;
  std::vector<int32_t>& history_;
  int emitted_ = 0;
};

// Turns the target's hidden-row capture on for a drafter that reads it, and
// off again however the request ends.
class CaptureScope {
 public:
  CaptureScope(Model& m, Drafter* d) : m_(m) {
    if (d && !d->target_layers().empty()) {
      status_ = m_.set_capture_layers(d->target_layers());
      on_ = status_.ok();
    }
  }
  ~CaptureScope() { stop(); }
  void stop() {
    if (on_) (void)m_.set_capture_layers({});
    on_ = false;
  }
  const Status& status() const { return status_; }
  bool on() const { return on_; }

 private:
  Model& m_;
  Status status_;
  bool on_ = false;
};

void count_position(std::vector<int64_t>& v, size_t i) {
  if (v.size() <= i) v.resize(i + 1, 0);
  v[i]++;
}
}  // namespace

std::vector<int32_t> sanitize_drafts(std::vector<int32_t> drafts, int k, int vocab, std::span<const int32_t> stop_ids) {
  if (k < 0) k = 0;
  if (drafts.size() > size_t(k)) drafts.resize(size_t(k));
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (drafts[i] < 0 || drafts[i] >= vocab) {
      drafts.resize(i);
      break;
    }
    if (is_stop(stop_ids, drafts[i])) {
      drafts.resize(i + 1);
      break;
    }
  }
  return drafts;
}

Status generate_drafted(Model& model, Session& session, std::span<const int32_t> prompt, const GenerateOptions& opt,
                        Drafter* drafter, const DraftOptions& dopt, const TokenCallback& on_token,
                        GenerateStats* stats, DraftStats* dstats) {
  if (prompt.empty()) return error("the prompt has no tokens");
  if (opt.prefill_chunk < 1) return error("prefill chunk must be at least 1");
  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  DraftStats dlocal;
  DraftStats& ds = dstats ? *dstats : dlocal;
  ds.drafter = drafter ? drafter->name() : "";
  CancelScope cancel(model, opt.cancel);
  CaptureScope capture(model, drafter);
  DF_TRY(capture.status());
  if (drafter) DF_TRY(drafter->reset());
  // Hands the rows the target just committed to the drafter.
  auto observe = [&](int64_t pos, std::span<const int32_t> toks, size_t rows) -> Status {
    if (!drafter) return {};
    const auto t0 = Clock::now();
    TargetRows r{pos, toks.first(rows), {}};
    if (capture.on()) r.hidden = model.captured_rows().first(rows * model.captured_layer_count() * model.config().hidden);
    Status s = drafter->observe(r);
    ds.seconds_draft += since(t0);
    return s;
  };

  std::vector<float> logits;
  auto t0 = Clock::now();
  const auto interrupted = [&] { return opt.interrupted && opt.interrupted(); };
  for (size_t i = 0; i < prompt.size(); i += size_t(opt.prefill_chunk)) {
    if (interrupted()) {  // as generate(): the stats cover what ran
      st.prefill_seconds += since(t0);
      return {};
    }
    const size_t n = std::min(prompt.size() - i, size_t(opt.prefill_chunk));
    const bool last = i + n == prompt.size();
    const int64_t pos = session.length;
    DF_TRY(model.forward(prompt.subspan(i, n), session, last ? Logits::LastRow : Logits::None, &logits, &st.forward));
    st.prompt_tokens += int64_t(n);
    DF_TRY(observe(pos, prompt.subspan(i, n), n));
  }
  st.prefill_seconds += since(t0);
  if (opt.max_new <= 0) return {};

  t0 = Clock::now();
  const uint64_t bytes0 = st.forward.expert_bytes;
  const int vocab = model.config().vocab;
  std::vector<int32_t> history(dopt.committed.begin(), dopt.committed.end());
  history.reserve(history.size() + prompt.size() + size_t(opt.max_new));
  history.insert(history.end(), prompt.begin(), prompt.end());
  Emitter out(opt, on_token, st, history);
  DraftPolicy policy(dopt.policy);
  std::vector<int32_t> block;
  bool go = out.emit(decide_token(opt, logits, session.length), logits);
  while (go && !interrupted()) {
    const int32_t pending = history.back();
    int k = drafter && !policy.off() ? policy.width() : 0;
    k = std::min(k, out.remaining() - 1);  // the block's last row can only add a bonus token
    if (dopt.max_context > 0) k = int(std::min<int64_t>(k, dopt.max_context - session.length - 1));
    std::vector<int32_t> drafts;
    double draft_s = 0;
    if (k > 0) {
      const auto td = Clock::now();
      DF_ASSIGN(drafts, drafter->propose(history, k));
      drafts = sanitize_drafts(std::move(drafts), k, vocab, opt.stop_ids);
      draft_s = since(td);
      ds.seconds_draft += draft_s;
      if (drafts.empty()) {
        ds.empty_proposals++;
        policy.empty_proposal(draft_s);
      }
    }

    if (drafts.empty()) {  // a plain step, as generate() takes it
      const auto tp = Clock::now();
      const int64_t pos = session.length;
      DF_TRY(model.forward(std::span<const int32_t>(&pending, 1), session, Logits::LastRow, &logits, &st.forward));
      const double s = since(tp);
      ds.seconds_plain += s;
      ds.plain_passes++;
      policy.plain_step(s);
      if (!policy.off()) {
        const auto to = Clock::now();
        DF_TRY(observe(pos, std::span<const int32_t>(&pending, 1), 1));
        policy.overhead(since(to));
      }
      ds.decode_tokens++;
      go = out.emit(decide_token(opt, logits, session.length), logits);
    } else {
      block.assign(1, pending);
      block.insert(block.end(), drafts.begin(), drafts.end());
      const size_t T = block.size(), V = size_t(vocab);
      const int64_t pos = session.length;
      auto tv = Clock::now();
      DF_TRY(model.verify(block, session, &logits, &st.forward));
      const double verify_s = since(tv);
      ds.seconds_verify += verify_s;
      ds.verify_passes++;
      ds.proposals++;
      ds.proposed += int64_t(drafts.size());
      // How far the drafts match the target, stops aside (the policy's and
      // the statistics' measure of the drafter).
      // Row i decides the token at position pos + i + 1 (the picker's penalties
      // see the drafts before it as if emitted, then forget them).
      size_t matched = 0;
      const size_t mark = opt.picker ? opt.picker->mark() : 0;
      while (matched < drafts.size() &&
             decide_token(opt, std::span<const float>(logits).subspan(matched * V, V), pos + int64_t(matched) + 1) ==
                 drafts[matched]) {
        if (opt.picker) opt.picker->accept(drafts[matched]);
        ++matched;
      }
      if (opt.picker) opt.picker->rewind(mark);
      for (size_t i = 0; i < drafts.size(); ++i) {
        count_position(ds.proposed_at, i);
        if (i < matched) count_position(ds.accepted_at, i);
      }
      ds.accepted += int64_t(matched);
      // Emission: row i decides t_i; rows 0..i are committed.
      size_t rows = 0;
      for (size_t i = 0; i < T; ++i) {
        const auto row = std::span<const float>(logits).subspan(i * V, V);
        const int32_t t = decide_token(opt, row, pos + int64_t(i) + 1);
        rows = i + 1;
        ds.decode_tokens++;
        go = out.emit(t, row);
        if (!go || i == drafts.size() || t != drafts[i]) break;
      }
      tv = Clock::now();
      DF_TRY(model.commit_verified(session, rows));
      const double commit_s = since(tv);
      ds.seconds_commit += commit_s;
      const auto tr = Clock::now();
      DF_TRY(drafter->accept(rows - 1));
      const double rollback_s = since(tr);
      ds.seconds_rollback += rollback_s;
      const auto to = Clock::now();
      DF_TRY(observe(pos, block, rows));
      const double observe_s = since(to);
      policy.drafted_step(int(drafts.size()), int(matched), int(rows), draft_s + verify_s + commit_s + rollback_s +
                                                                           observe_s);
    }
    if (policy.off() && !ds.switched_off) {
      const std::string was = drafter->name();
      if (drafter->fall_back()) {  // the next drafter of a chain takes over, with a fresh probe
        ds.fallbacks.push_back(fmt::format("{} off after {} tokens ({}); {} took over", was, st.generated_tokens,
                                           policy.off_reason(), drafter->name()));
        ds.drafter.append(1, ',');
        ds.drafter.append(drafter->name());
        policy.restart();
        if (drafter->target_layers().empty()) capture.stop();
        continue;
      }
      ds.switched_off = true;
      ds.off_reason = policy.off_reason();
      ds.off_after_tokens = st.generated_tokens;
      capture.stop();  // nothing reads the rows any more
    }
  }
  st.decode_seconds += since(t0);
  ds.decode_expert_bytes += st.forward.expert_bytes - bytes0;
  ds.baseline_s = policy.baseline();
  ds.credit_s = policy.credit();
  return {};
}

}  // namespace deltafin
