#include "generate/model_drafter.h"

#include <algorithm>

#include "generate/greedy.h"

namespace deltafin {

namespace {
constexpr size_t kCatchUpChunk = 512;  // rows per block when the drafter catches up on a prompt
}

Result<std::unique_ptr<ModelDrafter>> ModelDrafter::open(const std::string& dir, const ModelConfig& target,
                                                         int threads) {
  auto m = Model::open(dir, threads);
  if (!m.ok()) return m.status().with_context(fmt::format("draft model {}", dir));
  const ModelConfig& c = m.value()->config();
  if (c.vocab != target.vocab)
    return error("draft model {}: vocabulary of {} ids, the target has {}", dir, c.vocab, target.vocab);
  return std::make_unique<ModelDrafter>(std::move(m.value()));
}

ModelDrafter::ModelDrafter(std::unique_ptr<Model> model) : model_(std::move(model)) {
  session_ = model_->new_session();
}

Status ModelDrafter::reset() {
  session_ = model_->new_session();
  fed_.clear();
  logits_.clear();
  chain_fed_ = 0;
  proposed_ = false;
  return {};
}

Status ModelDrafter::feed(std::span<const int32_t> tokens) {
  for (size_t i = 0; i < tokens.size(); i += kCatchUpChunk) {
    const size_t n = std::min(kCatchUpChunk, tokens.size() - i);
    DF_TRY(model_->forward(tokens.subspan(i, n), session_, Logits::LastRow, &logits_));
    fed_.insert(fed_.end(), tokens.begin() + ptrdiff_t(i), tokens.begin() + ptrdiff_t(i + n));
  }
  return {};
}

Status ModelDrafter::observe(const TargetRows& rows) {
  if (proposed_ || rows.first_position != int64_t(fed_.size())) return {};
  return feed(rows.tokens);
}

Status ModelDrafter::rewind() {
  session_.kda = kda_before_;  // same shapes: the vectors' storage is reused
  session_.truncate_mla(int64_t(fed_before_), model_->config());
  session_.length = int64_t(fed_before_);
  fed_.resize(fed_before_);
  logits_.clear();
  chain_fed_ = 0;
  return {};
}

Result<std::vector<int32_t>> ModelDrafter::propose(std::span<const int32_t> history, int max_k) {
  std::vector<int32_t> out;
  if (max_k <= 0 || history.empty()) return out;
  chain_fed_ = 0;
  // What the session ran must be a prefix of the history; if it is not (a
  // caller that skipped accept()), start over: slower, never wrong.
  const bool prefix = fed_.size() <= history.size() && std::equal(fed_.begin(), fed_.end(), history.begin());
  const bool have_logits = !logits_.empty() && fed_.size() == history.size();
  if (!prefix || (fed_.size() == history.size() && !have_logits)) DF_TRY(reset());
  proposed_ = true;
  DF_TRY(feed(history.subspan(fed_.size())));
  kda_before_ = session_.kda;
  fed_before_ = fed_.size();
  for (int i = 0; i < max_k; ++i) {
    const int32_t d = argmax_lowest(logits_);
    out.push_back(d);
    if (i + 1 == max_k) break;
    DF_TRY(model_->forward(std::span<const int32_t>(&d, 1), session_, Logits::LastRow, &logits_));
    fed_.push_back(d);
    ++chain_fed_;
  }
  return out;
}

Status ModelDrafter::accept(size_t accepted) {
  // Guesses d1..d_chain_fed_ are in the session; they stay if all were right.
  if (accepted >= chain_fed_) {
    chain_fed_ = 0;
    logits_.clear();  // they belong to the last guess, which the next history extends
    return {};
  }
  return rewind();
}

}  // namespace deltafin
