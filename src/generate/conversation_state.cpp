#include "generate/conversation_state.h"

#include <algorithm>
#include <optional>

namespace deltafin {

Status ConversationState::generate(std::span<const int32_t> ids, const GenerateOptions& opt, Drafter* drafter,
                                   DraftOptions dopt, const TokenCallback& on_token, ConversationTurnStats* stats) {
  if (ids.empty()) return error("the conversation renders to no tokens");
  ConversationTurnStats local;
  ConversationTurnStats& st = stats ? *stats : local;
  st = {};
  std::vector<Boundary> kept = std::move(kept_);
  kept_.clear();

  // The longest kept boundary that `ids` strictly extends (one token at least
  // must run, to give the logits of the first answer token).
  Boundary* best = nullptr;
  for (Boundary& b : kept)
    if (ids.size() > b.committed.size() && std::equal(b.committed.begin(), b.committed.end(), ids.begin()) &&
        (!best || b.committed.size() > best->committed.size()))
      best = &b;
  Session session = best ? std::move(best->session) : model_.new_session();
  kept.clear();

  const size_t start = size_t(session.length);
  st.prompt_tokens = int64_t(ids.size());
  st.reused_tokens = int64_t(start);
  st.prefilled_tokens = int64_t(ids.size() - start);
  dopt.committed = ids.subspan(0, start);

  std::vector<int32_t> tape(ids.begin(), ids.end());  // prompt, then every emitted token
  std::optional<Boundary> after_prompt;
  auto on_each = [&](int32_t tok, std::span<const float> logits) {
    // The first decided token: the prompt is all committed. A snapshot copy.
    if (tape.size() == ids.size() && size_t(session.length) == ids.size())
      after_prompt = Boundary{std::vector<int32_t>(ids.begin(), ids.end()), session};
    tape.push_back(tok);
    return on_token(tok, logits);
  };
  const auto rest = ids.subspan(start);
  const Status s = drafter ? generate_drafted(model_, session, rest, opt, drafter, dopt, on_each, &st.generate, &st.draft)
                           : deltafin::generate(model_, session, rest, opt, on_each, &st.generate);
  if (!s.ok()) return s;  // the session may be part-way through a block: keep nothing
  if (after_prompt) kept_.push_back(std::move(*after_prompt));
  const size_t end = size_t(session.length);
  if (end > 0 && end <= tape.size() && (!after_prompt || end > ids.size())) {
    tape.resize(end);
    kept_.push_back(Boundary{std::move(tape), std::move(session)});
  }
  return {};
}

}  // namespace deltafin
