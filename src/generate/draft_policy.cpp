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

int DraftPolicy::width() const {
  if (off_ || o_.draft_max == 0 || pause_ > 0) return 0;
  if (o_.economics && int(samples_.size()) < std::max(1, o_.baseline_steps)) return 0;
  return k_;
}

void DraftPolicy::plain_step(double seconds) {
  samples_.push_back(seconds);
  if (samples_.size() > kBaselineWindow) samples_.erase(samples_.begin());
  baseline_ = median(samples_);
  if (!credit_started_ && int(samples_.size()) >= std::max(1, o_.baseline_steps)) {
    credit_ = o_.allowance * baseline_;
    credit_started_ = true;
  }
  if (pause_ > 0) --pause_;
}

void DraftPolicy::charge(double seconds) {
  if (!credit_started_) return;  // before the baseline: nothing to compare with
  credit_ -= seconds;
  if (!o_.economics) return;
  if (credit_ < 0 && !off_) {
    off_ = true;
    off_reason_ = fmt::format("credit {:.3f} ms after {} drafted steps (baseline {:.3f} ms per plain token)",
                              credit_ * 1e3, drafted_, baseline_ * 1e3);
  }
}

void DraftPolicy::empty_proposal(double seconds) { charge(seconds); }

void DraftPolicy::drafted_step(int proposed, int accepted, int emitted, double seconds) {
  ++drafted_;
  credit_ += baseline_ * emitted;
  charge(seconds);
  if (proposed <= 0) return;
  if (accepted >= proposed) {
    k_ = std::min(o_.draft_max, std::max(proposed, k_) * 2);
    zeros_ = 0;
  } else if (accepted > 0) {
    k_ = std::max(o_.probe, std::min(o_.draft_max, 2 * accepted));
    zeros_ = 0;
  } else {
    pause_ = std::min(o_.backoff_max, 1 << std::min(zeros_, 20));
    ++zeros_;
    k_ = o_.probe;
  }
}

}  // namespace deltafin
