// The engine against the independent float64 PyTorch reference of Qwen3-MoE and
// Qwen3 (tools/reference/qwen3_torch.py): for each golden file in
// tests/golden/qwen3/ (made by tests/golden/qwen3/regenerate.sh), the
// checkpoint is rebuilt in-process, checked to be the one the reference read
// (SHA-256 per shard), and teacher-forced along the reference's greedy decode:
// every step's logits within 1e-4 x max|ref| of the reference's and the same
// argmax. Also: logits bit-identical with 1 and 2 threads and whether the rows
// run as one block or token by token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/qwen3_writer.h"
#include "checkpoint_test_util.h"
#include "io/checksum.h"
#include "model/model.h"

namespace deltafin {
namespace {

using testing::ScratchDir;

const std::string kGoldenDir = std::string(DELTAFIN_SOURCE_DIR) + "/tests/golden/qwen3/";
constexpr double kRelTol = 1e-4;

struct Golden {
  nlohmann::json doc;
  std::vector<float> logits;  // [cases][steps][vocab]
  int steps = 0, vocab = 0;
  const float* row(size_t c, int s) const { return logits.data() + (c * size_t(steps) + size_t(s)) * size_t(vocab); }
};

Golden load_golden(const std::string& name) {
  Golden g;
  std::ifstream j(kGoldenDir + name + ".json");
  EXPECT_TRUE(j.good()) << kGoldenDir + name + ".json";
  if (!j.good()) return g;
  g.doc = nlohmann::json::parse(j);
  g.steps = g.doc.at("steps").get<int>();
  g.vocab = g.doc.at("vocab").get<int>();
  const std::string bytes = testing::read_file(kGoldenDir + name + ".logits.f32");
  const size_t want = g.doc.at("cases").size() * size_t(g.steps) * size_t(g.vocab);
  EXPECT_EQ(bytes.size(), want * 4) << name;
  g.logits.resize(want);
  std::memcpy(g.logits.data(), bytes.data(), std::min(bytes.size(), want * 4));  // little-endian hosts
  return g;
}

// Writes the golden's checkpoint and checks it is byte for byte the one the
// reference read; false (with a failure) otherwise.
bool build_checkpoint(const Golden& g, const ScratchDir& dir) {
  auto p = find_qwen3_preset(g.doc.at("preset").get<std::string>(),
                             Qwen3PresetOptions{g.doc.at("expert_format").get<std::string>(), 0, 0});
  EXPECT_TRUE(p.ok()) << p.message();
  if (!p.ok()) return false;
  const Status s = write_qwen3_checkpoint(*p, dir.str(), g.doc.at("seed").get<uint64_t>());
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return false;
  // A golden may run the checkpoint under changed config keys (YaRN's rope_scaling).
  if (g.doc.contains("config_overrides")) {
    const auto path = dir.path() / "config.json";
    auto cfg = nlohmann::ordered_json::parse(testing::read_file(path));
    for (const auto& [key, value] : g.doc["config_overrides"].items()) cfg[key] = value;
    std::ofstream(path) << cfg.dump(2) << "\n";
  }
  for (const auto& [shard, sum] : g.doc.at("sha256").items()) {
    auto got = sha256_file((dir.path() / shard).string());
    EXPECT_TRUE(got.ok()) << got.message();
    if (!got.ok() || got.value() != sum.get<std::string>()) {
      ADD_FAILURE() << shard << ": not the checkpoint the golden file was made from; the make-model generator "
                    << "changed: rerun tests/golden/qwen3/regenerate.sh";
      return false;
    }
  }
  return true;
}

std::unique_ptr<Model> open_model(const std::string& dir, int threads) {
  auto m = Model::open(dir, threads);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m.value()) : nullptr;
}

int argmax(const float* z, int n) { return int(std::max_element(z, z + n) - z); }  // first maximum

// Teacher-forces every case of one golden file; returns the worst
// max|engine - ref| / max|ref| over all steps.
double check_golden(const std::string& name) {
  const Golden g = load_golden(name);
  if (g.logits.empty()) return -1;
  ScratchDir dir("qwen3-ref");
  if (!build_checkpoint(g, dir)) return -1;
  auto m = open_model(dir.str(), 2);
  if (!m) return -1;
  EXPECT_EQ(m->config().vocab, g.vocab);
  double worst = 0;
  int failures = 0;
  for (size_t c = 0; c < g.doc.at("cases").size(); ++c) {
    const auto& cs = g.doc["cases"][c];
    const auto prompt = cs.at("prompt").get<std::vector<int32_t>>();
    const auto ids = cs.at("ids").get<std::vector<int32_t>>();
    Session session = m->new_session();
    std::vector<float> logits;
    Status st = m->forward(prompt, session, Logits::LastRow, &logits);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return -1;
    for (int s = 0; s < g.steps; ++s) {
      const float* ref = g.row(c, s);
      EXPECT_EQ(logits.size(), size_t(g.vocab));
      if (logits.size() != size_t(g.vocab)) return -1;
      double diff = 0, scale = 0;
      int at = 0;
      for (int v = 0; v < g.vocab; ++v) {
        const double d = std::fabs(double(logits[size_t(v)]) - ref[v]);
        if (d > diff) diff = d, at = v;
        scale = std::max(scale, std::fabs(double(ref[v])));
      }
      worst = std::max(worst, diff / scale);
      if (diff > kRelTol * scale && failures++ < 8)
        ADD_FAILURE() << name << " case " << c << " step " << s << ": max |engine - ref| " << diff << " at id " << at
                      << " (engine " << logits[size_t(at)] << ", ref " << ref[at] << "), allowed "
                      << kRelTol * scale;
      // The greedy id; a near tie (reference gap within twice the logit
      // error) may go either way and is only reported.
      const int got = argmax(logits.data(), g.vocab);
      if (got != ids[size_t(s)]) {
        const double gap = double(ref[ids[size_t(s)]]) - ref[got];
        if (gap > 2 * diff && failures++ < 8)
          ADD_FAILURE() << name << " case " << c << " step " << s << ": engine argmax " << got << ", reference "
                        << ids[size_t(s)] << " (reference gap " << gap << ")";
        else
          std::printf("%s case %zu step %d: near tie %d vs %d (gap %.3g)\n", name.c_str(), c, s, got, ids[size_t(s)],
                      gap);
      }
      const int32_t next = ids[size_t(s)];  // the golden id, so one near tie cannot derail the rest
      st = m->forward(std::span<const int32_t>(&next, 1), session, Logits::LastRow, &logits);
      EXPECT_TRUE(st.ok()) << st.message();
      if (!st.ok()) return -1;
    }
  }
  std::printf("qwen3 reference %s: worst max|engine - ref| / max|ref| = %.3g\n", name.c_str(), worst);
  return worst;
}

void check_family(const std::string& stem) {
  for (int seed = 1; seed <= 3; ++seed) {
    const double w = check_golden(stem + "-s" + std::to_string(seed));
    EXPECT_GE(w, 0) << stem << " seed " << seed;
  }
}

TEST(Qwen3Reference, MoeBf16MatchesTorch) { check_family("qwen3-moe-tiny-bf16"); }
TEST(Qwen3Reference, MoeFp8MatchesTorch) { check_family("qwen3-moe-tiny-fp8"); }
TEST(Qwen3Reference, DenseTiedMatchesTorch) { check_family("qwen3-tiny-bf16"); }
// YaRN rope_scaling (factor 4 over an original context of 64 positions, so
// the frequency ramp and the attention factor both act on short prompts).
TEST(Qwen3Reference, YarnMatchesTorch) { EXPECT_GE(check_golden("qwen3-moe-tiny-bf16-yarn-s1"), 0); }

// The longest case's prompt and greedy ids, run (a) as one block with every
// row's logits and (b) token by token, with 1 and 2 threads: all four give
// the same bits.
void check_invariance(const std::string& name) {
  const Golden g = load_golden(name);
  ASSERT_FALSE(g.logits.empty());
  ScratchDir dir("qwen3-inv");
  ASSERT_TRUE(build_checkpoint(g, dir));
  const auto& cs = g.doc["cases"].back();
  auto tokens = cs.at("prompt").get<std::vector<int32_t>>();
  const auto ids = cs.at("ids").get<std::vector<int32_t>>();
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  const size_t V = size_t(g.vocab), T = tokens.size();
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2}) {
    auto m = open_model(dir.str(), threads);
    ASSERT_TRUE(m);
    Session block = m->new_session();
    std::vector<float> all;
    ASSERT_TRUE(m->forward(tokens, block, Logits::AllRows, &all).ok());
    ASSERT_EQ(all.size(), T * V);
    runs.push_back(all);
    Session one = m->new_session();
    std::vector<float> rows, lg;
    for (int32_t t : tokens) {
      ASSERT_TRUE(m->forward(std::span<const int32_t>(&t, 1), one, Logits::LastRow, &lg).ok());
      rows.insert(rows.end(), lg.begin(), lg.end());
    }
    runs.push_back(rows);
  }
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t t = 0; t < T; ++t)
      ASSERT_EQ(std::memcmp(runs[0].data() + t * V, runs[r].data() + t * V, V * 4), 0)
          << name << ": run " << r << " (0: block/1 thread, 1: tokens/1, 2: block/2, 3: tokens/2) differs at row " << t;
}

TEST(Qwen3Reference, SameBitsForAnyThreadCountAndBlocking) {
  for (const char* n : {"qwen3-moe-tiny-bf16-s1", "qwen3-moe-tiny-fp8-s2", "qwen3-tiny-bf16-s3"}) check_invariance(n);
}

}  // namespace
}  // namespace deltafin
