// The model state of one conversation across turns, for `deltafin chat`.
// Each turn is given the whole conversation rendered from scratch; the state
// kept from the last turn is reused when that rendering strictly extends the
// tokens it committed, so a turn prefills only what is new. After a turn two
// boundaries are kept (as the server does, server/engine.h): the prompt (a
// snapshot taken when its first token is decided) and wherever generation
// ended (the answer, with its last token pending; or an interrupted prefill).
// The template may re-render an answer differently from the tokens the model
// wrote (an answer cut at --max-new gets its closing markers; a non-canonical
// token split is re-encoded): then only the prompt boundary matches and the
// answer is prefilled as rendered. The tokens are therefore always those of
// a fresh session given the whole rendering (the engine is chunk invariant),
// and sampling draws by absolute position (generate/sampler.h). No rollback
// to a common prefix: KDA state is recurrent.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "generate/greedy.h"
#include "generate/speculative.h"
#include "model/model.h"

namespace deltafin {

struct ConversationTurnStats {
  int64_t prompt_tokens = 0;     // the whole rendered conversation
  int64_t reused_tokens = 0;     // committed by the kept state, not prefilled again
  int64_t prefilled_tokens = 0;  // prompt_tokens - reused_tokens
  GenerateStats generate;
  DraftStats draft;
};

class ConversationState {
 public:
  explicit ConversationState(Model& model) : model_(model) {}

  // Generates after `ids` (the whole conversation, rendered); `drafter` may be
  // null. `dopt.committed` is set here (the reused tokens). A failed turn
  // drops the kept state; an interrupted one (opt.interrupted) keeps it.
  Status generate(std::span<const int32_t> ids, const GenerateOptions& opt, Drafter* drafter, DraftOptions dopt,
                  const TokenCallback& on_token, ConversationTurnStats* stats = nullptr);

  void clear() { kept_.clear(); }
  size_t kept_boundaries() const { return kept_.size(); }

 private:
  struct Boundary {
    std::vector<int32_t> committed;  // the tokens session holds: committed.size() == session.length
    Session session;
  };
  Model& model_;
  std::vector<Boundary> kept_;
};

}  // namespace deltafin
