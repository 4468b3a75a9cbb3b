#include "generate/dspark_drafter.h"

namespace deltafin {

DsparkDrafter::DsparkDrafter(std::unique_ptr<Dspark> dspark, int64_t max_context)
    : dspark_(std::move(dspark)), max_context_(max_context) {
  cache_.clear(size_t(dspark_->config().num_layers));
}

Status DsparkDrafter::reset() {
  cache_.clear(size_t(dspark_->config().num_layers));
  aligned_ = true;
  return {};
}

Status DsparkDrafter::observe(const TargetRows& rows) {
  const size_t n = rows.tokens.size();
  const DsparkConfig& c = dspark_->config();
  if (!aligned_ || n == 0) return {};
  // Rows must continue the cache, with their hidden rows; anything else
  // (a caller that did not capture) leaves DSpark silent, never wrong.
  if (rows.first_position != int64_t(cache_.length) ||
      rows.hidden.size() != n * c.target_layers.size() * size_t(c.hidden)) {
    aligned_ = false;
    return {};
  }
  if (int64_t(cache_.length + n) > max_context_) return {};  // past the bound it stays silent
  dspark_->ingest(rows.hidden, n, cache_);
  return {};
}

Result<std::vector<int32_t>> DsparkDrafter::propose(std::span<const int32_t> history, int max_k) {
  // The anchor is the pending token: the one position after the cache.
  if (!aligned_ || history.empty() || history.size() != cache_.length + 1 || max_k <= 0) return std::vector<int32_t>{};
  dspark_->propose(history.back(), std::min(max_k, dspark_->config().block_size), cache_, last_);
  return last_.ids;
}

}  // namespace deltafin
