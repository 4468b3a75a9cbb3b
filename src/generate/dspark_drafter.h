// DSpark as a Drafter: the target's hidden rows of every committed position
// feed its context cache (observe), and a proposal is one 7-row DSpark pass
// anchored at the pending token. Its state follows the target's commits
// only, so it has nothing to roll back: rejected rows were never ingested.
#pragma once
#include <memory>

#include "generate/drafter.h"
#include "model/dspark.h"

namespace deltafin {

class DsparkDrafter : public Drafter {
 public:
  // Upstream's default: DSpark drafts only below this many context positions.
  static constexpr int64_t kDefaultMaxContext = 8192;

  explicit DsparkDrafter(std::unique_ptr<Dspark> dspark, int64_t max_context = kDefaultMaxContext);

  std::string name() const override { return "dspark"; }
  std::vector<int> target_layers() const override { return dspark_->config().target_layers; }
  Status reset() override;
  Status observe(const TargetRows& rows) override;
  Result<std::vector<int32_t>> propose(std::span<const int32_t> history, int max_k) override;
  Status accept(size_t) override { return {}; }

  Dspark& dspark() { return *dspark_; }
  const DsparkCache& cache() const { return cache_; }
  const DsparkProposal& last_proposal() const { return last_; }

 private:
  std::unique_ptr<Dspark> dspark_;
  int64_t max_context_;
  DsparkCache cache_;
  DsparkProposal last_;
  bool aligned_ = true;  // the cache holds exactly the target's committed positions
};

}  // namespace deltafin
