// DSpark: the loader reads the published layout and refuses what does not fit
// the target; the target's hidden-row capture is exact and batch invariant;
// ingestion in pieces equals ingestion at once; and the runtime proposes the
// ids of the independent PyTorch implementation (tools/train/dspark_torch.py)
// on the synthetic checkpoint, with hidden rows within the stated tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "generate/dspark_drafter.h"
#include "io/checksum.h"
#include "model/dspark.h"
#include "test_models.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Model> open_model(const std::string& dir, int threads = 1) {
  auto m = Model::open(dir, threads);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m.value()) : nullptr;
}

// A copy of a DSpark checkpoint with config.json edited by `edit`.
std::string edited_copy(const std::string& src, const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = testing::temp_dir("dspark-edit");
  fs::copy_file(src + "/model.safetensors", dir + "/model.safetensors");
  std::ifstream in(src + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  std::ofstream(dir + "/config.json") << j.dump(2);
  return dir;
}

TEST(Dspark, LoaderReadsThePublishedLayout) {
  const std::string& target = testing::tiny_model(5);
  const std::string& dir = testing::dspark_model(target, 7);
  auto m = open_model(target);
  ASSERT_TRUE(m);
  auto d = Dspark::open(dir, *m, 1);
  ASSERT_TRUE(d.ok()) << d.message();
  const DsparkConfig& c = d.value()->config();
  EXPECT_EQ(c.hidden, m->config().hidden);
  EXPECT_EQ(c.vocab, m->config().vocab);
  EXPECT_EQ(c.block_size, 7);
  EXPECT_EQ(c.mask_token_id, m->config().vocab - 3);
  EXPECT_EQ(c.target_layers, (std::vector<int>{0, 1, 3, 4, 5}));
  // K3's YaRN numbers: scale 1/sqrt(qk dim) x mscale(32)^2 with mscale = 0.1 ln 32 + 1.
  const double ms = 0.1 * std::log(32.0) + 1;
  EXPECT_NEAR(d.value()->attention_scale(), 1 / std::sqrt(64.0) * ms * ms, 1e-6);
  // Fast pairs keep the original frequency, slow ones are divided by the factor.
  const auto& inv = d.value()->inv_freq();
  EXPECT_FLOAT_EQ(inv.front(), 1.0f);
  EXPECT_NEAR(inv.back(), std::pow(50000.0, -30.0 / 32) / 32, 1e-12);
}

TEST(Dspark, LoaderRefusesWhatDoesNotFit) {
  const std::string& target = testing::tiny_model(5);
  const std::string& dir = testing::dspark_model(target, 7);
  auto m = open_model(target);
  ASSERT_TRUE(m);
  auto expect_error = [&](const std::string& d, const Model& t, const std::string& needle) {
    auto r = Dspark::open(d, t, 1);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
  };
  auto demo = open_model(std::string(DELTAFIN_SOURCE_DIR) + "/models/demo");
  ASSERT_TRUE(demo);
  expect_error(dir, *demo, "hidden_size");
  expect_error(edited_copy(dir, [](auto& j) { j["model_type"] = "kimi_k3"; }), *m, "k3_dspark");
  expect_error(edited_copy(dir, [](auto& j) { j["rope_scaling"]["type"] = "linear"; }), *m, "yarn");
  expect_error(edited_copy(dir, [](auto& j) { j["dflash_config"].erase("mask_token_id"); }), *m, "mask_token_id");
  expect_error(edited_copy(dir, [](auto& j) { j["dflash_config"]["mask_token_id"] = 100000; }), *m, "mask_token_id");
  expect_error(edited_copy(dir, [](auto& j) { j["dflash_config"]["target_layer_ids"] = {0, 9}; }), *m, "target layer 9");
  expect_error(edited_copy(dir, [](auto& j) { j["mla_use_nope"] = true; }), *m, "mla_use_nope");
  expect_error(edited_copy(dir, [](auto& j) { j["num_hidden_layers"] = 3; }), *m, "layers.2.");
  expect_error(edited_copy(dir, [](auto& j) { j["kv_lora_rank"] = 32; }), *m, "kv_a_proj_with_mqa");
}

TEST(Dspark, CaptureIsExactAndBatchInvariant) {
  auto m = open_model(testing::tiny_model(5), 2);
  ASSERT_TRUE(m);
  const size_t H = size_t(m->config().hidden);
  const std::vector<int32_t> toks = {3, 60, 7, 7, 200, 11};
  const std::vector<int> layers = {4, 0, 2};
  Session plain = m->new_session();
  std::vector<float> want, got;
  ASSERT_TRUE(m->forward(toks, plain, Logits::AllRows, &want).ok());
  ASSERT_TRUE(m->set_capture_layers(layers).ok());
  Session block = m->new_session();
  ASSERT_TRUE(m->forward(toks, block, Logits::AllRows, &got).ok());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0);  // capture changes nothing
  const std::vector<float> all(m->captured_rows().begin(), m->captured_rows().end());
  ASSERT_EQ(all.size(), toks.size() * layers.size() * H);
  Session step = m->new_session();
  for (size_t t = 0; t < toks.size(); ++t) {
    ASSERT_TRUE(m->forward(std::span<const int32_t>(&toks[t], 1), step, Logits::LastRow, &got).ok());
    ASSERT_EQ(m->captured_rows().size(), layers.size() * H);
    EXPECT_EQ(std::memcmp(m->captured_rows().data(), &all[t * layers.size() * H], layers.size() * H * 4), 0)
        << "row " << t;
  }
  EXPECT_FALSE(m->set_capture_layers({99}).ok());
  EXPECT_FALSE(m->set_capture_layers({1, 1}).ok());
  ASSERT_TRUE(m->set_capture_layers({}).ok());
}

TEST(Dspark, IngestionInPiecesEqualsOneBlock) {
  const std::string& target = testing::tiny_model(5);
  auto m = open_model(target, 2);
  ASSERT_TRUE(m);
  auto d = Dspark::open(testing::dspark_model(target, 7), *m, 2);
  ASSERT_TRUE(d.ok()) << d.message();
  Dspark& ds = *d.value();
  ASSERT_TRUE(m->set_capture_layers(ds.config().target_layers).ok());
  std::vector<int32_t> toks;
  for (int i = 0; i < 40; ++i) toks.push_back((i * 37 + 5) % 256);
  const size_t row = ds.config().target_layers.size() * size_t(ds.config().hidden);
  Session s = m->new_session();
  std::vector<float> lg;
  ASSERT_TRUE(m->forward(toks, s, Logits::None, &lg).ok());
  const std::vector<float> rows(m->captured_rows().begin(), m->captured_rows().end());
  DsparkCache one, pieces;
  one.clear(size_t(ds.config().num_layers));
  pieces.clear(size_t(ds.config().num_layers));
  ds.ingest(rows, toks.size(), one);
  for (size_t at = 0, n = 1; at < toks.size(); at += n, n = n % 7 + 1) {
    n = std::min(n, toks.size() - at);
    ds.ingest(std::span<const float>(rows).subspan(at * row, n * row), n, pieces);
  }
  ASSERT_EQ(one.length, pieces.length);
  for (int j = 0; j < ds.config().num_layers; ++j) {
    EXPECT_EQ(one.latent[size_t(j)], pieces.latent[size_t(j)]);
    EXPECT_EQ(one.rope[size_t(j)], pieces.rope[size_t(j)]);
  }
  DsparkProposal a, b;
  ds.propose(9, 7, one, a);
  ds.propose(9, 7, pieces, b);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.ids.size(), 7u);
  EXPECT_EQ(a.confidence.size(), 7u);
  ASSERT_TRUE(m->set_capture_layers({}).ok());
}

// The drafter adapter stays silent (never wrong) when it is out of step.
TEST(Dspark, DrafterIsSilentWhenMisaligned) {
  const std::string& target = testing::tiny_model(5);
  auto m = open_model(target, 1);
  ASSERT_TRUE(m);
  auto d = Dspark::open(testing::dspark_model(target, 7), *m, 1);
  ASSERT_TRUE(d.ok()) << d.message();
  DsparkDrafter dr(std::move(d.value()), 16);
  ASSERT_TRUE(dr.reset().ok());
  const std::vector<int32_t> h = {1, 2, 3};
  auto p = dr.propose(h, 5);  // the cache holds nothing: the anchor is not at position 0
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
  ASSERT_TRUE(dr.observe(TargetRows{5, h, {}}).ok());  // not the next position
  p = dr.propose(std::vector<int32_t>{1}, 5);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
}

// The same formula as synthetic_rows() in tools/train/dspark_golden.py:
// float64, then float32, then BF16 (each rounding to nearest even).
std::vector<float> synthetic_rows(size_t n, size_t layers, size_t H) {
  std::vector<float> v(n * layers * H);
  for (size_t p = 0; p < n; ++p)
    for (size_t l = 0; l < layers; ++l)
      for (size_t d = 0; d < H; ++d) {
        const double x = 2.0 * std::sin(0.37 * double(p) + 1.3 * double(l) + 0.011 * double(d)) +
                         0.5 * std::cos(0.05 * double(d) * double(l + 1));
        v[(p * layers + l) * H + d] = round_bf16(float(x));
      }
  return v;
}

std::vector<float> from_hex_bf16(const std::string& hex) {
  std::vector<float> v(hex.size() / 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(uint16_t(std::stoul(hex.substr(4 * i, 4), nullptr, 16)));
  return v;
}

struct Agreement {
  size_t elements = 0, identical = 0;
  double worst = 0;  // largest |a - b| / max(1, |b|)
  void add(std::span<const float> got, std::span<const float> want) {
    for (size_t i = 0; i < want.size(); ++i) {
      const double diff = std::abs(double(got[i]) - double(want[i]));
      identical += diff == 0;
      worst = std::max(worst, diff / std::max(1.0, std::abs(double(want[i]))));
      ++elements;
    }
  }
  double share() const { return elements ? double(identical) / double(elements) : 0; }
};

// The PyTorch reference's proposals on the synthetic checkpoint
// (tests/golden/dspark_pytorch.json, tools/train/dspark_golden.py).
TEST(Dspark, ProposesTheIdsOfThePyTorchReference) {
  std::ifstream f(std::string(DELTAFIN_SOURCE_DIR) + "/tests/golden/dspark_pytorch.json");
  ASSERT_TRUE(f.good());
  const auto golden = nlohmann::json::parse(f);
  const std::string& target = testing::tiny_model(golden.at("target_seed").get<int>());
  const std::string& dir = testing::dspark_model(target, golden.at("dspark_seed").get<int>());
  // The same bytes the reference read.
  for (const auto& [name, sum] : golden.at("sha256").items()) {
    const std::string path = (name.starts_with("target/") ? target + "/" + name.substr(7) : dir + "/" + name.substr(7));
    auto got = sha256_file(path);
    ASSERT_TRUE(got.ok()) << got.message();
    ASSERT_EQ(got.value(), sum.get<std::string>()) << name;
  }
  auto m = open_model(target, 2);
  ASSERT_TRUE(m);
  auto d = Dspark::open(dir, *m, 2);
  ASSERT_TRUE(d.ok()) << d.message();
  Dspark& ds = *d.value();
  ASSERT_TRUE(m->set_capture_layers(ds.config().target_layers).ok());
  const size_t H = size_t(ds.config().hidden), NL = ds.config().target_layers.size();
  Agreement synthetic, end_to_end, capture;
  int cases = 0, synthetic_exact = 0;
  for (const auto& c : golden.at("cases")) {
    const auto ctx = c.at("context").get<std::vector<int32_t>>();
    const bool from_target = c.at("rows").get<std::string>() == "target";
    std::vector<float> rows;
    if (from_target) {
      Session s = m->new_session();
      std::vector<float> lg;
      ASSERT_TRUE(m->forward(ctx, s, Logits::None, &lg).ok());
      rows.assign(m->captured_rows().begin(), m->captured_rows().end());
      std::vector<float> last(rows.end() - ptrdiff_t(NL * H), rows.end());
      for (auto& x : last) x = round_bf16(x);
      capture.add(last, from_hex_bf16(c.at("last_rows_bf16").get<std::string>()));
    } else {
      rows = synthetic_rows(ctx.size(), NL, H);
    }
    DsparkCache cache;
    cache.clear(size_t(ds.config().num_layers));
    ds.ingest(rows, ctx.size(), cache);
    DsparkProposal p;
    ds.propose(c.at("anchor").get<int32_t>(), 7, cache, p);
    EXPECT_EQ(p.ids, c.at("ids").get<std::vector<int32_t>>()) << c.at("rows") << " context of " << ctx.size();
    const auto want = from_hex_bf16(c.at("hidden_bf16").get<std::string>());
    ASSERT_EQ(want.size(), 7 * H);
    Agreement one;
    one.add(p.hidden, want);
    if (!from_target && one.identical == one.elements) ++synthetic_exact;
    (from_target ? end_to_end : synthetic).add(p.hidden, want);
    ++cases;
  }
  EXPECT_EQ(cases, 14);
  std::printf("dspark vs pytorch, hidden rows: same BF16 context rows: %d of 7 cases bit-identical, %.4f of values "
              "(worst relative %.4g); end to end from each side's target %.4f (worst %.4g); captured rows %.4f "
              "identical\n",
              synthetic_exact, synthetic.share(), synthetic.worst, end_to_end.share(), end_to_end.worst, capture.share());
  // The tolerance (docs/guide/drafting.md). float32 sums in another order land on
  // a neighbouring BF16 value now and then; one such flip early in the block
  // moves many later roundings by an ulp or two, so a case is either
  // bit-identical or differs in many values, each by a few BF16 ulps.
  EXPECT_GE(synthetic_exact, 4);
  EXPECT_LE(synthetic.worst, 1.0 / 16);
  EXPECT_LE(end_to_end.worst, 1.0 / 16);
  // The target's partial sums, fp32 here and float64 there, agree to BF16
  // rounding but for values that sit next to a rounding boundary.
  EXPECT_GE(capture.share(), 0.99);
  ASSERT_TRUE(m->set_capture_layers({}).ok());
}

}  // namespace
}  // namespace deltafin
