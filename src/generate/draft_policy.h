// How wide to draft, and whether drafting pays (pure decisions: no clock, no
// model; speculative.cpp feeds it measured times).
//
// Width: a request starts with a probe of `probe` tokens. A fully accepted
// proposal doubles the width (up to draft_max); a partial one with a
// accepted sets it to max(probe, min(draft_max, 2a)); a proposal with none
// accepted stops drafting for a back-off of 1, 2, 4, ... plain steps (doubling
// while zeros follow each other, at most backoff_max), after which a new
// probe starts.
//
// Economics: the baseline is the median time of the request's plain steps
// (one target pass, one token). Each drafted step earns
// baseline x tokens emitted - its cost (drafting + verification + rollback);
// a request starts with `allowance` baseline tokens of credit. When the
// credit goes negative drafting is off for the rest of the request.
#pragma once
#include <string>
#include <vector>

namespace deltafin {

struct DraftPolicyOptions {
  int draft_max = 7;         // widest proposal (spec: at most 8 rows per verification)
  int probe = 2;             // the first proposal's width
  int baseline_steps = 2;    // plain steps timed before the first proposal
  double allowance = 1.0;    // starting credit, in baseline tokens
  int backoff_max = 64;      // longest pause after proposals with nothing accepted
  bool economics = true;     // false: never switch off (tests of the verifier; no baseline needed)
};

class DraftPolicy {
 public:
  explicit DraftPolicy(const DraftPolicyOptions& o);

  // Tokens to propose before the next target pass; 0: run a plain step.
  int width() const;
  // A plain target pass took `seconds`.
  void plain_step(double seconds);
  // The drafter was asked and proposed nothing; asking cost `seconds`.
  void empty_proposal(double seconds);
  // Drafter work outside a proposal (following the target's rows) took `seconds`.
  void overhead(double seconds) { charge(seconds); }
  // A drafted step: `proposed` ids, the first `accepted` of them equal to the
  // target's tokens, `emitted` tokens out, `seconds` for drafting,
  // verification and rollback together.
  void drafted_step(int proposed, int accepted, int emitted, double seconds);

  bool off() const { return off_; }
  const std::string& off_reason() const { return off_reason_; }
  double baseline() const { return baseline_; }
  double credit() const { return credit_; }
  int drafted_steps() const { return drafted_; }

 private:
  DraftPolicyOptions o_;
  std::vector<double> samples_;  // the latest plain-step times
  double baseline_ = 0, credit_ = 0;
  bool credit_started_ = false;
  int k_, zeros_ = 0, pause_ = 0, drafted_ = 0;
  bool off_ = false;
  std::string off_reason_;
  void charge(double seconds);
};

}  // namespace deltafin
