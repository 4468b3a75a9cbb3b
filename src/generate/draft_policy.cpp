#include "generate/draft_policy.h"

#include <algorithm>

#include <fmt/format.h>

namespace deltafin {

namespace {
constexpr size_t kBaselineWindow = 16;  // plain-step times the median is taken over

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

DraftPolicy::DraftPolicy(const DraftPolicyOptions& o) : o_(o) {
  o_.draft_max = std::max(0, o_.draft_max);
  o_.probe = std::clamp(o_.probe, 1, std::max(1, o_.draft_max));
  k_ = o_.probe;
}

void DraftPolicy::restart() {
  DraftPolicy fresh(o_);
  fresh.samples_ = samples_;
  fresh.baseline_ = baseline_;
  fresh.credit_started_ = credit_started_;
  *this = std::move(fresh);
}

int DraftPolicy::width() const {
  if (off_ || o_.draft_max == 0 || pause_ > 0) return 0;
  if (o_.economics && int(samples_.size()) < std::max(1, o_.baseline_steps)) return 0;
  return k_econ_ > 0 ? std::min(k_, k_econ_) : k_;
}

double DraftPolicy::expected_speedup(int k) const {
  double tokens = 1, reach = 1;
  for (int i = 0; i < k; ++i) {
    const double seen = i < int(reached_.size()) ? double(reached_[size_t(i)]) : 0;
    const double ok = i < int(right_.size()) ? double(right_[size_t(i)]) : 0;
    reach *= (ok + 1) / (seen + 2);
    tokens += reach;
  }
  return tokens / (1 + row_cost() * k);
}

void DraftPolicy::back_off() {
  pause_ = std::min(o_.backoff_max, 1 << std::min(zeros_, 20));
  ++zeros_;
  k_ = o_.probe;
}

void DraftPolicy::plain_step(double seconds) {
  samples_.push_back(seconds);
  if (samples_.size() > kBaselineWindow) samples_.erase(samples_.begin());
  baseline_ = median(samples_);
  if (int(samples_.size()) >= std::max(1, o_.baseline_steps)) credit_started_ = true;
  if (pause_ > 0) --pause_;
  update_credit();
}

double DraftPolicy::credit() const {
  return baseline_ * (o_.allowance + gained_ - c_ * double(rows_)) - charges_;
}

void DraftPolicy::update_credit() {
  if (!o_.economics || !credit_started_ || off_) return;
  if (const double cr = credit(); cr < 0) {
    off_ = true;
    off_reason_ = fmt::format("credit {:.3f} ms after {} drafted steps (baseline {:.3f} ms per plain token, "
                              "{:.2f} plain steps per proposed token)",
                              cr * 1e3, drafted_, baseline_ * 1e3, c_);
  }
}

void DraftPolicy::charge(double seconds) {
  if (!credit_started_) return;  // before the baseline: nothing to compare with
  charges_ += seconds;
  update_credit();
}

void DraftPolicy::empty_proposal(double seconds) { charge(seconds); }

void DraftPolicy::drafted_step(int proposed, int accepted, int emitted, double seconds) {
  ++drafted_;
  if (proposed <= 0) return;
  gained_ += emitted - 1;
  rows_ += proposed;
  if (baseline_ > 0) {
    step_costs_.push_back(std::max(0.0, seconds / baseline_ - 1) / proposed);
    c_ = median(step_costs_);
  }
  update_credit();
  for (int i = 0; i < proposed && i <= accepted; ++i) {
    if (reached_.size() <= size_t(i)) reached_.resize(size_t(i) + 1, 0), right_.resize(size_t(i) + 1, 0);
    reached_[size_t(i)]++;
    if (i < accepted) right_[size_t(i)]++;
  }
  if (o_.economics && rows_ > 0) {
    double best = 0;
    k_econ_ = 1;
    for (int k = 1; k <= o_.draft_max; ++k)
      if (const double s = expected_speedup(k); s > best) best = s, k_econ_ = k;
    if (best < 1) {  // no width is expected to pay: back off, then measure again
      back_off();
      return;
    }
  }
  if (accepted >= proposed) {
    k_ = std::min(o_.draft_max, std::max(proposed, k_) * 2);
    zeros_ = 0;
  } else if (accepted > 0) {
    k_ = std::max(o_.probe, std::min(o_.draft_max, 2 * accepted));
    zeros_ = 0;
  } else {
    back_off();
  }
}

}  // namespace deltafin
