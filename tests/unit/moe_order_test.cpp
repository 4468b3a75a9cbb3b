// The MoE computes the experts that are ready (ExpertSource::ready: a RAM
// tier hit, a read already in) before those it would have to wait for, and
// the order never changes a bit of the logits.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>

#include "model/model.h"
#include "test_models.h"

namespace deltafin {
namespace {

// The checkpoint's experts, with every third request of a begin() (i % 3 ==
// 1) reported ready and the others not; records the order of the waits.
class OrderProbe : public ExpertSource {
 public:
  explicit OrderProbe(std::unique_ptr<CheckpointExpertSource> inner) : inner_(std::move(inner)) {}
  Status begin(int layer, std::span<const int> experts, std::span<ExpertWeights> out) override {
    std::lock_guard<std::mutex> lock(mu_);
    waits_.emplace_back();
    sizes_.push_back(experts.size());
    return inner_->begin(layer, experts, out);
  }
  Status wait(size_t i) override {
    std::lock_guard<std::mutex> lock(mu_);
    waits_.back().push_back(i);
    return inner_->wait(i);
  }
  bool ready(size_t i) const override { return i % 3 == 1; }
  ExpertSourceStats stats() const override { return inner_->stats(); }
  std::vector<std::vector<size_t>> waits_;
  std::vector<size_t> sizes_;

 private:
  std::unique_ptr<CheckpointExpertSource> inner_;
  std::mutex mu_;
};

struct Opened {
  std::unique_ptr<Model> model;
  OrderProbe* probe = nullptr;
};

Opened open_probed(const std::string& dir, int threads) {
  Opened o;
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.ok()) << ck.message();
  auto cfg = ModelConfig::from_json((*ck)->config());
  EXPECT_TRUE(cfg.ok()) << cfg.message();
  auto experts = CheckpointExpertSource::create(**ck, *cfg);
  EXPECT_TRUE(experts.ok()) << experts.message();
  auto probe = std::make_unique<OrderProbe>(std::move(*experts));
  o.probe = probe.get();
  auto m = Model::open_with(std::move(*ck), std::move(probe), threads);
  EXPECT_TRUE(m.ok()) << m.message();
  if (m.ok()) o.model = std::move(*m);
  return o;
}

std::vector<float> logits_of(Model& m, const std::vector<int32_t>& prompt) {
  Session s = m.new_session();
  std::vector<float> lg;
  EXPECT_TRUE(m.forward(prompt, s, Logits::AllRows, &lg).ok());
  return lg;
}

const std::vector<int32_t> kPrompt = {5, 77, 3, 200, 41, 41, 9, 130, 64};

TEST(MoeOrder, ReadyExpertsAreComputedFirstAndTheLogitsAreUnchanged) {
  const std::string& dir = testing::tiny_model(1);
  auto plain = Model::open(dir, 1);
  ASSERT_TRUE(plain.ok()) << plain.message();
  const std::vector<float> want = logits_of(**plain, kPrompt);

  Opened one = open_probed(dir, 1);
  ASSERT_TRUE(one.model);
  const std::vector<float> got = logits_of(*one.model, kPrompt);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

  // One thread: each begin()'s ready requests in order, then the rest in order.
  ASSERT_FALSE(one.probe->waits_.empty());
  bool some_reordered = false;
  for (size_t b = 0; b < one.probe->waits_.size(); ++b) {
    const size_t n = one.probe->sizes_[b];
    std::vector<size_t> expect;
    for (size_t i = 1; i < n; i += 3) expect.push_back(i);
    for (size_t i = 0; i < n; ++i)
      if (i % 3 != 1) expect.push_back(i);
    EXPECT_EQ(one.probe->waits_[b], expect) << "begin " << b;
    some_reordered = some_reordered || n > 2;
  }
  EXPECT_TRUE(some_reordered);  // a union of 3 or more, so the order above differs from request order

  // Two threads: every request waited for exactly once, the same logits.
  Opened two = open_probed(dir, 2);
  ASSERT_TRUE(two.model);
  const std::vector<float> got2 = logits_of(*two.model, kPrompt);
  ASSERT_EQ(got2.size(), want.size());
  EXPECT_EQ(std::memcmp(got2.data(), want.data(), want.size() * sizeof(float)), 0);
  for (size_t b = 0; b < two.probe->waits_.size(); ++b) {
    std::vector<size_t> w = two.probe->waits_[b];
    std::sort(w.begin(), w.end());
    std::vector<size_t> all(two.probe->sizes_[b]);
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    EXPECT_EQ(w, all) << "begin " << b;
  }
}

}  // namespace
}  // namespace deltafin
