// Generation with drafting: the same tokens and the same logits as generate()
// (greedy.h), in fewer target passes when a drafter guesses well, greedy or
// sampling (a seeded draw is a function of the row's logits and its position,
// generate/sampler.h, so the verifier draws exactly what a plain step would).
//
// One step, with the newest token pending (decided, not yet run):
//   drafts = drafter.propose(history, k)            untrusted ids
//   rows   = [pending, d1 .. dk]                    one verify() block
//   t_i    = decide(row i, position p + i + 1)     row i's logits are those
//            (argmax, ties to the lowest id, or     a plain step would give
//            the picker's seeded draw)
//   emit t_0, t_1, ... while t_i == d_{i+1}; the first mismatch is the
//   target's correction, t_k after a full match its bonus; stops (stop ids,
//   max_new, the callback) end the emission token by token
//   commit_verified(rows that were emitted from)   the session is then the
//                                                   one plain decoding makes
// With no drafts (none proposed, policy says plain) a step is forward() of
// the pending token, exactly as in generate(). DraftPolicy decides the width
// and switches drafting off when it does not pay.
#pragma once
#include <string>
#include <vector>

#include "generate/draft_policy.h"
#include "generate/drafter.h"
#include "generate/greedy.h"

namespace deltafin {

struct DraftOptions {
  DraftPolicyOptions policy;
  // Positions the session may hold (0: no bound): a verification block is
  // clipped so its rows stay below it. Emission itself is bounded by max_new.
  int64_t max_context = 0;
  // Tokens the session already holds before `prompt` (a server's reused
  // conversation state): the drafter's history starts with them, so n-gram
  // lookups and model drafters see the whole conversation.
  std::span<const int32_t> committed;
};

struct DraftStats {
  std::string drafter;          // "ngram", "model", "dspark" ("model,ngram" after a fall-back), "" when none
  std::vector<std::string> fallbacks;  // a chain's drafters that were switched off, and why
  int64_t plain_passes = 0;     // decode steps of one row
  int64_t verify_passes = 0;    // decode steps that verified drafts
  int64_t decode_tokens = 0;    // tokens emitted by decode passes (all but the prefill's token)
  int64_t proposals = 0;        // non-empty proposals verified
  int64_t empty_proposals = 0;  // the drafter had nothing to say
  int64_t proposed = 0, accepted = 0;
  // By draft position i (d_{i+1}): how often it was proposed, and how often
  // it and every draft before it matched the target.
  std::vector<int64_t> proposed_at, accepted_at;
  double seconds_draft = 0;     // propose() and observe()
  double seconds_verify = 0;    // verify()
  double seconds_commit = 0;    // commit_verified(): the target's replay and cache truncation
  double seconds_rollback = 0;  // the drafter's accept(): its own rollback
  double seconds_plain = 0;     // plain steps' forward()
  uint64_t decode_expert_bytes = 0;  // routed expert bytes used by decode passes (union per layer per block)
  double baseline_s = 0, credit_s = 0;
  bool switched_off = false;
  std::string off_reason;
  int64_t off_after_tokens = -1;  // generated tokens when drafting switched off

  int64_t target_passes() const { return plain_passes + verify_passes; }
  double tokens_per_pass() const { return target_passes() ? double(decode_tokens) / double(target_passes()) : 0; }
};

// `drafter` may be null (then this is generate()). The drafter is reset at
// the start; its target layers are captured for the request and the capture
// is turned off again at the end.
Status generate_drafted(Model& model, Session& session, std::span<const int32_t> prompt, const GenerateOptions& opt,
                        Drafter* drafter, const DraftOptions& dopt, const TokenCallback& on_token,
                        GenerateStats* stats = nullptr, DraftStats* dstats = nullptr);

// The proposal as the verifier uses it: at most k ids, cut at the first id
// outside [0, vocab) and after the first stop id.
std::vector<int32_t> sanitize_drafts(std::vector<int32_t> drafts, int k, int vocab,
                                     std::span<const int32_t> stop_ids);

}  // namespace deltafin
