// Shared by the drafting tests: a generation's ids and the logits that decided
// each of them, plain and drafted, and drafters that try to break the verifier.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/mt19937_64.h"
#include "generate/greedy.h"
#include "generate/speculative.h"

namespace deltafin::testing {

struct Decoded {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // every emitted token's logits, in order
};

inline Decoded decode_plain(Model& m, Session& s, std::span<const int32_t> prompt, const GenerateOptions& g) {
  Decoded d;
  auto cb = [&](int32_t t, std::span<const float> l) {
    d.ids.push_back(t);
    d.logits.insert(d.logits.end(), l.begin(), l.end());
    return true;
  };
  Status st = generate(m, s, prompt, g, cb);
  EXPECT_TRUE(st.ok()) << st.message();
  return d;
}

inline Decoded decode_drafted(Model& m, Session& s, std::span<const int32_t> prompt, const GenerateOptions& g,
                              Drafter* drafter, const DraftOptions& o, DraftStats* ds = nullptr) {
  Decoded d;
  auto cb = [&](int32_t t, std::span<const float> l) {
    d.ids.push_back(t);
    d.logits.insert(d.logits.end(), l.begin(), l.end());
    return true;
  };
  Status st = generate_drafted(m, s, prompt, g, drafter, o, cb, nullptr, ds);
  EXPECT_TRUE(st.ok()) << st.message();
  return d;
}

// Ids equal and every logit bit-identical.
inline ::testing::AssertionResult same_decoding(const Decoded& a, const Decoded& b) {
  if (a.ids != b.ids) {
    size_t i = 0;
    while (i < a.ids.size() && i < b.ids.size() && a.ids[i] == b.ids[i]) ++i;
    return ::testing::AssertionFailure() << "ids differ at token " << i << " (" << a.ids.size() << " vs "
                                         << b.ids.size() << " tokens)";
  }
  if (a.logits.size() != b.logits.size() ||
      std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) != 0)
    return ::testing::AssertionFailure() << "logits differ";
  return ::testing::AssertionSuccess();
}

// Draft options that always draft (no economics gate, no back-off), so a
// test exercises the verifier on every step it can.
inline DraftOptions always_draft(int draft_max = 7) {
  DraftOptions o;
  o.policy.draft_max = draft_max;
  o.policy.economics = false;
  o.policy.backoff_max = 0;
  return o;
}

// A drafter whose proposal is any function of (history, k); it keeps no state.
class ScriptedDrafter : public Drafter {
 public:
  using Fn = std::function<std::vector<int32_t>(std::span<const int32_t> history, int k)>;
  ScriptedDrafter(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  Status reset() override { return {}; }
  Result<std::vector<int32_t>> propose(std::span<const int32_t> h, int k) override { return fn_(h, k); }
  Status accept(size_t) override { return {}; }

 private:
  std::string name_;
  Fn fn_;
};

}  // namespace deltafin::testing
