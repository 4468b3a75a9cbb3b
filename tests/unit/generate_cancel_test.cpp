// The cancellation hook: a flag set while generate() runs stops it before
// the next layer, in prefill and in decode, with Status::cancelled().
#include <gtest/gtest.h>

#include <atomic>

#include "generate/greedy.h"
#include "test_models.h"

namespace deltafin {
namespace {

std::unique_ptr<Model> tiny() {
  auto m = Model::open(testing::tiny_model(11), 1);
  EXPECT_TRUE(m.ok()) << m.message();
  return std::move(m).value();
}

TEST(GenerateCancel, PrefillStopsBeforeTheNextLayer) {
  auto model = tiny();
  std::atomic<bool> cancel{false};
  int calls = 0, after = 0;
  // Called inside each MoE layer of each block: set the flag in the second
  // MoE layer of the first prefill block; no later layer may start.
  model->set_route_observer([&](int64_t, int, size_t, int, std::span<const int>) {
    if (cancel.load()) ++after;
    if (++calls == 2) cancel.store(true);
  });
  GenerateOptions g;
  g.prefill_chunk = 8;
  g.max_new = 4;
  g.cancel = &cancel;
  const std::vector<int32_t> prompt(64, 65);  // eight blocks
  Session s = model->new_session();
  int tokens = 0;
  Status st = generate(*model, s, prompt, g, [&](int32_t, std::span<const float>) { return ++tokens > 0; });
  EXPECT_TRUE(st.is_cancelled()) << st.message();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(after, 0);
  EXPECT_EQ(tokens, 0);
  EXPECT_EQ(s.length, 0);  // the first block never finished
}

TEST(GenerateCancel, DecodeStopsAtTheNextStepAndTheHookIsCleared) {
  auto model = tiny();
  std::atomic<bool> cancel{false};
  GenerateOptions g;
  g.max_new = 50;
  g.cancel = &cancel;
  const std::vector<int32_t> prompt = {65, 66, 67};
  Session s = model->new_session();
  int tokens = 0;
  Status st = generate(*model, s, prompt, g, [&](int32_t, std::span<const float>) {
    if (++tokens == 3) cancel.store(true);
    return true;
  });
  EXPECT_TRUE(st.is_cancelled());
  EXPECT_EQ(tokens, 3);
  // generate() cleared the model's hook: the flag, still set, no longer stops it.
  Session s2 = model->new_session();
  GenerateOptions plain;
  plain.max_new = 5;
  int n = 0;
  EXPECT_TRUE(generate(*model, s2, prompt, plain, [&](int32_t, std::span<const float>) { return ++n > 0; }).ok());
  EXPECT_EQ(n, 5);
}

TEST(GenerateCancel, CancelledSurvivesContextAndIsNotAnOrdinaryError) {
  EXPECT_TRUE(Status::cancelled().with_context("serve").is_cancelled());
  EXPECT_FALSE(Status::cancelled().ok());
  EXPECT_FALSE(error("cancelled").is_cancelled());
}

}  // namespace
}  // namespace deltafin
