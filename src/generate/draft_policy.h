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
// The width is also capped where drafting stops paying by the request's own
// measurements: a drafted step of k proposals costs about 1 + c x k plain
// steps (c measured from the drafted steps so far: verification rows and the
// drafter's own work), and emits 1 + sum over i <= k of a_1 x ... x a_i
// tokens, a_i the measured rate at which draft i is right when the ones
// before it were (a prior of 1/2 for positions not seen yet). The width is the
// k (up to the rule's) with the most tokens per unit of cost; when no k is
// expected to beat a plain step, drafting backs off as after a miss.
//
// Economics: the baseline b is the median time of the request's plain steps
// (one target pass, one token) and c the median over drafted steps of their
// cost (drafting + verification + rollback, in units of b) beyond one plain
// step, per proposed token. Medians, because a step of a millisecond is
// easily doubled by the scheduler. The credit is
//   b x (allowance + sum over drafted steps of (emitted - 1 - c x proposed))
//   - the measured time of proposals that came back empty and of the
//     drafter's other work,
// i.e. the time drafting saved so far; when it goes negative drafting is off
// for the rest of the request.
#pragma once
#include <string>
#include <vector>

namespace deltafin {

struct DraftPolicyOptions {
  int draft_max = 7;         // widest proposal (spec: at most 8 rows per verification)
  int probe = 2;             // the first proposal's width
  int baseline_steps = 3;    // plain steps timed before the first proposal (their median is the first baseline)
  double allowance = 2.0;    // starting credit, in baseline tokens: the most a losing request can lose
  int backoff_max = 64;      // longest pause after proposals with nothing accepted
  bool economics = true;     // false: never switch off (tests of the verifier; no baseline needed)
};

class DraftPolicy {
 public:
  explicit DraftPolicy(const DraftPolicyOptions& o);
  // A new drafter takes over: everything measured about drafting is
  // forgotten (a fresh probe and allowance), the baseline is kept.
  void restart();

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
  double credit() const;
  int drafted_steps() const { return drafted_; }
  double row_cost() const { return c_; }  // c, in plain steps per proposed token
  // Expected tokens per unit of cost for a proposal of k (1.0 = a plain step).
  double expected_speedup(int k) const;

 private:
  DraftPolicyOptions o_;
  std::vector<double> samples_;     // the latest plain-step times
  std::vector<double> step_costs_;  // per drafted step: (its time / baseline - 1) / proposed
  double baseline_ = 0, charges_ = 0;
  double gained_ = 0;  // sum of emitted - 1 over drafted steps
  void update_credit();
  bool credit_started_ = false;
  int k_, zeros_ = 0, pause_ = 0, drafted_ = 0, k_econ_ = 0;
  double c_ = 0;
  int64_t rows_ = 0;  // sum of the drafted steps' proposal lengths
  std::vector<int64_t> reached_, right_;  // per position: proposals whose earlier drafts were all right; of those, right
  void back_off();
  bool off_ = false;
  std::string off_reason_;
  void charge(double seconds);
};

}  // namespace deltafin
