// The engine against the reference path (issue 2, must-show): on three seeds
// of the `tiny` test model and four prompts each, 32 greedy tokens from the
// engine equal the reference's, and the logits agree within 1e-4 of the
// largest |logit|.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>

#include <fmt/format.h>

#include "generate/greedy.h"
#include "model/model.h"
#include "reference_model.h"

namespace deltafin {
namespace {

constexpr int kNewTokens = 32;

// A freshly generated tiny checkpoint in a temporary directory, removed afterwards.
class TinyModelDir {
 public:
  explicit TinyModelDir(int seed)
      : dir_(std::filesystem::temp_directory_path() / fmt::format("deltafin-ref-{}-{}", ::getpid(), seed)) {
    std::filesystem::remove_all(dir_);
    const std::string cmd = fmt::format("'{}' make-model --preset tiny --out '{}' --seed {} > /dev/null",
                                        DELTAFIN_BINARY, dir_.string(), seed);
    status_ = std::system(cmd.c_str());
  }
  ~TinyModelDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return status_ == 0; }
  std::string path() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
  int status_ = -1;
};

// Deterministic token-id prompts of different lengths, ids below 256.
std::vector<int32_t> make_prompt(int length, int seed, int vocab) {
  std::mt19937 rng(uint32_t(1000 * seed + length));
  std::uniform_int_distribution<int32_t> id(0, std::min(vocab, 256) - 1);
  std::vector<int32_t> p;
  for (int i = 0; i < length; ++i) p.push_back(id(rng));
  return p;
}

struct EngineRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

EngineRun run_engine(Model& model, const std::vector<int32_t>& prompt, Status* status) {
  EngineRun run;
  Session session = model.new_session();
  GenerateOptions opt;
  opt.max_new = kNewTokens;
  opt.stop_ids = {};  // all 32 tokens, whatever they are
  *status = generate(model, session, prompt, opt, [&](int32_t token, std::span<const float> logits) {
    run.tokens.push_back(token);
    run.logits.emplace_back(logits.begin(), logits.end());
    return true;
  });
  return run;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::abs(x)));
  return m;
}

class EngineVsReference : public ::testing::TestWithParam<int> {};

TEST_P(EngineVsReference, GreedyTokensAndLogitsMatch) {
  const int seed = GetParam();
  TinyModelDir dir(seed);
  ASSERT_TRUE(dir.ok()) << "make-model --preset tiny --seed " << seed << " failed";

  auto ref = reference::ReferenceModel::load(dir.path());
  ASSERT_TRUE(ref.ok()) << ref.message();
  auto model = Model::open(dir.path(), 2);
  ASSERT_TRUE(model.ok()) << model.message();
  const int vocab = ref->config().vocab;

  std::set<int32_t> distinct;
  std::vector<std::vector<float>> final_logits;
  for (int length : {1, 5, 17, 40}) {
    SCOPED_TRACE(fmt::format("seed {} prompt length {}", seed, length));
    const std::vector<int32_t> prompt = make_prompt(length, seed, vocab);

    auto expected = ref->greedy(prompt, kNewTokens);
    ASSERT_TRUE(expected.ok()) << expected.message();
    Status st;
    const EngineRun got = run_engine(**model, prompt, &st);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(got.tokens.size(), size_t(kNewTokens));
    ASSERT_EQ(got.logits.size(), size_t(kNewTokens));

    // Tokens, step by step; logits at every step up to the first difference
    // (after that the two runs see different inputs).
    for (int i = 0; i < kNewTokens; ++i) {
      const auto& want = expected->logits[size_t(i)];
      const auto& have = got.logits[size_t(i)];
      ASSERT_EQ(have.size(), size_t(vocab)) << "step " << i;
      const double tol = 1e-4 * max_abs(want);
      double worst = 0;
      size_t worst_at = 0;
      for (size_t v = 0; v < want.size(); ++v) {
        ASSERT_TRUE(std::isfinite(have[v])) << "step " << i << " logit " << v;
        const double d = std::abs(double(have[v]) - double(want[v]));
        if (d > worst) {
          worst = d;
          worst_at = v;
        }
      }
      EXPECT_LE(worst, tol) << "step " << i << ": logit " << worst_at << " engine " << have[worst_at]
                            << " reference " << want[worst_at];
      ASSERT_EQ(got.tokens[size_t(i)], expected->tokens[size_t(i)])
          << "step " << i << " (reference top-1 margin " << expected->margins[size_t(i)] << ")";
    }
    distinct.insert(got.tokens.begin(), got.tokens.end());
    final_logits.push_back(got.logits.back());
  }

  // Not degenerate: the model's output depends on its input and it does not
  // emit one token forever, so a broken engine cannot pass trivially.
  EXPECT_GE(distinct.size(), 4u) << "seed " << seed << " produced too few distinct tokens";
  bool differ = false;
  for (size_t p = 1; p < final_logits.size(); ++p) differ |= final_logits[p] != final_logits[0];
  EXPECT_TRUE(differ) << "final logits identical for every prompt";
  for (const auto& l : final_logits) {
    const auto [lo, hi] = std::minmax_element(l.begin(), l.end());
    EXPECT_GT(*hi - *lo, 1e-3 * max_abs(l)) << "flat logits";
  }
}

INSTANTIATE_TEST_SUITE_P(TinySeeds, EngineVsReference, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace deltafin
