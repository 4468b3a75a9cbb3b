// Drafting never changes a token or a logit: generate_drafted() with every
// drafter (n-gram, the demo's model drafter, a DSpark-layout drafter) and
// with hostile ones gives memcmp-identical ids and logits to generate(), on
// the demo model's 24 golden prompts and on a random preset, with 1 and 2
// threads, with experts read from the checkpoint and from a store.
#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "draft_test_util.h"
#include "generate/drafter_open.h"
#include "generate/dspark_drafter.h"
#include "generate/model_drafter.h"
#include "generate/ngram_drafter.h"
#include "store/store_run.h"
#include "test_models.h"

namespace deltafin {
namespace {

using testing::always_draft;
using testing::Decoded;
using testing::decode_drafted;
using testing::decode_plain;
using testing::same_decoding;
using testing::ScriptedDrafter;

const std::string kDemo = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo";
const std::string kDemoDraft = std::string(DELTAFIN_SOURCE_DIR) + "/models/demo-draft";
constexpr int kGoldenTokens = 64;

std::vector<std::vector<int32_t>> golden_prompts() {
  std::ifstream f(std::string(DELTAFIN_SOURCE_DIR) + "/tests/golden/demo_pytorch_tokens.json");
  const auto j = nlohmann::json::parse(f);
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : j.at("prompts")) out.push_back(p.at("ids").get<std::vector<int32_t>>());
  return out;
}

std::unique_ptr<Model> open_model(const std::string& dir, int threads) {
  auto m = Model::open(dir, threads);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m.value()) : nullptr;
}

std::unique_ptr<Drafter> make_drafter(const std::string& kind, const Model& target, const std::string& dir,
                                      int threads) {
  if (kind == "ngram") return std::make_unique<NgramDrafter>();
  auto c = open_drafter(kind == "dspark" ? testing::dspark_model(dir, 7) : kDemoDraft, target, {}, threads);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? std::move(c->drafter) : nullptr;
}

// Every golden prompt, plain and drafted, compared token by token and logit by logit.
void check_golden(Model& m, Drafter& d, const DraftOptions& o, DraftStats* total) {
  GenerateOptions g;
  g.max_new = kGoldenTokens;
  for (const auto& prompt : golden_prompts()) {
    Session a = m.new_session(), b = m.new_session();
    const Decoded plain = decode_plain(m, a, prompt, g);
    DraftStats ds;
    const Decoded drafted = decode_drafted(m, b, prompt, g, &d, o, &ds);
    ASSERT_TRUE(same_decoding(plain, drafted)) << d.name();
    EXPECT_EQ(a.length, b.length);
    total->verify_passes += ds.verify_passes, total->accepted += ds.accepted, total->proposed += ds.proposed;
  }
}

class DraftGolden : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(DraftGolden, DemoPromptsIdenticalToPlainDecoding) {
  const auto& [kind, threads] = GetParam();
  auto m = open_model(kDemo, threads);
  ASSERT_TRUE(m);
  auto d = make_drafter(kind, *m, kDemo, threads);
  ASSERT_TRUE(d);
  DraftStats total;
  check_golden(*m, *d, always_draft(), &total);
  // The verifier really ran: drafts were proposed and verified.
  EXPECT_GT(total.verify_passes, 24);
  if (kind != "dspark") {
    EXPECT_GT(total.accepted, 0);
  }  // a random DSpark rarely guesses right
}

INSTANTIATE_TEST_SUITE_P(Drafters, DraftGolden,
                         ::testing::Combine(::testing::Values("ngram", "model", "dspark"), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_threads" + std::to_string(std::get<1>(info.param));
                         });

// The default policy (probe, widening, economics) on the same prompts.
TEST(DraftIdentity, DefaultPolicyOnDemoPrompts) {
  auto m = open_model(kDemo, 1);
  ASSERT_TRUE(m);
  NgramDrafter ngram;
  DraftStats total;
  check_golden(*m, ngram, DraftOptions{}, &total);
  auto chain = open_drafter(kDemoDraft, *m, {}, 1);  // the model drafter, then ngram
  ASSERT_TRUE(chain.ok()) << chain.message();
  check_golden(*m, *chain->drafter, DraftOptions{}, &total);
}

// From a store: the target streams its experts through the read engine.
TEST(DraftIdentity, FromStore) {
  const std::string dir = testing::temp_dir("draft-store");
  std::filesystem::create_directories(dir + "/d0");  // prepare never creates a drive root
  const std::string cmd = std::string(DELTAFIN_BINARY) + " prepare --quiet --model " + kDemo + " --out " + dir +
                          "/store --drive " + dir + "/d0:1000 > /dev/null 2>&1";
  ASSERT_EQ(testing::run_command(cmd), 0) << cmd;
  auto ref = open_model(kDemo, 2);
  ASSERT_TRUE(ref);
  StoreRunOptions so;
  so.store = dir + "/store";
  so.direct = "off";  // the temp filesystem may not take O_DIRECT; the read path is the same
  auto sm = open_store_model(so, 2);
  ASSERT_TRUE(sm.ok()) << sm.message();
  Model& m = *sm->model;
  const auto prompts = golden_prompts();
  for (const std::string kind : {"ngram", "model", "dspark"}) {
    auto d = make_drafter(kind, m, kDemo, 2);
    ASSERT_TRUE(d);
    GenerateOptions g;
    g.max_new = kGoldenTokens;
    for (size_t i = 0; i < prompts.size(); i += 6) {
      Session a = ref->new_session(), b = m.new_session();
      const Decoded plain = decode_plain(*ref, a, prompts[i], g);  // from the checkpoint, not drafted
      const Decoded drafted = decode_drafted(m, b, prompts[i], g, d.get(), always_draft());
      ASSERT_TRUE(same_decoding(plain, drafted)) << kind << " prompt " << i;
    }
  }
}

// A random preset: n-gram, DSpark layout, a second random model as the model
// drafter (same vocabulary), and an oracle that proposes the true
// continuation (every block fully accepted, up to 8 rows).
class DraftRandomPreset : public ::testing::TestWithParam<int> {};

TEST_P(DraftRandomPreset, IdenticalToPlainDecoding) {
  const int threads = GetParam();
  const std::string& dir = testing::tiny_model(3);
  auto m = open_model(dir, threads);
  ASSERT_TRUE(m);
  std::vector<std::vector<int32_t>> prompts;
  Mt19937_64 rng(99);
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < 5 + 13 * size_t(p); ++i) ids.push_back(int32_t(rng() % 256));
    prompts.push_back(ids);
  }
  GenerateOptions g;
  g.max_new = 40;
  std::vector<Decoded> plain;
  for (const auto& p : prompts) {
    Session s = m->new_session();
    plain.push_back(decode_plain(*m, s, p, g));
  }
  size_t current = 0;
  ScriptedDrafter oracle("oracle", [&](std::span<const int32_t> h, int k) {
    const size_t at = h.size() - prompts[current].size();  // tokens emitted so far
    std::vector<int32_t> out;
    for (size_t i = at; i < plain[current].ids.size() && int(out.size()) < k; ++i) out.push_back(plain[current].ids[i]);
    return out;
  });
  NgramDrafter ngram;
  auto other = ModelDrafter::open(testing::tiny_model(4), m->config(), threads);
  ASSERT_TRUE(other.ok()) << other.message();
  auto dspark = open_drafter(testing::dspark_model(dir, 7), *m, {}, threads);
  ASSERT_TRUE(dspark.ok()) << dspark.message();
  for (Drafter* d : std::initializer_list<Drafter*>{&oracle, &ngram, other->get(), dspark->drafter.get()}) {
    for (int draft_max : {1, 3, 7}) {
      for (current = 0; current < prompts.size(); ++current) {
        Session s = m->new_session();
        DraftStats ds;
        const Decoded got = decode_drafted(*m, s, prompts[current], g, d, always_draft(draft_max), &ds);
        ASSERT_TRUE(same_decoding(plain[current], got)) << d->name() << " draft_max " << draft_max;
        if (d == &oracle) {
          EXPECT_EQ(ds.accepted, ds.proposed);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, DraftRandomPreset, ::testing::Values(1, 2));

// Hostile drafters: any proposal, the same output.
TEST(DraftIdentity, HostileDraftersNeverChangeTheOutput) {
  auto m = open_model(kDemo, 2);
  ASSERT_TRUE(m);
  const int V = m->config().vocab, eos = m->config().eos_id;
  const auto prompts = golden_prompts();
  GenerateOptions g;
  g.max_new = 48;
  g.stop_ids = {eos};
  std::vector<int32_t> truth;  // the plain continuation of the prompt being run
  size_t prompt_len = 0;
  Mt19937_64 rng(7);
  auto continuation = [&](std::span<const int32_t> h, size_t n) {
    std::vector<int32_t> out;
    for (size_t i = h.size() - prompt_len; i < truth.size() && out.size() < n; ++i) out.push_back(truth[i]);
    return out;
  };
  std::vector<ScriptedDrafter> hostile = {
      {"random", [&](std::span<const int32_t>, int k) {
         std::vector<int32_t> out;
         for (int i = 0; i < k; ++i) out.push_back(int32_t(rng() % uint64_t(V + 40)) - 20);  // some out of range
         return out;
       }},
      {"always-wrong", [&](std::span<const int32_t> h, int k) {
         auto out = continuation(h, size_t(k));
         for (auto& t : out) t = (t + 1) % V;
         return out;
       }},
      {"always-eos", [&](std::span<const int32_t>, int k) { return std::vector<int32_t>(size_t(k), eos); }},
      {"vocab-edge", [&](std::span<const int32_t>, int k) {
         std::vector<int32_t> edge = {V - 1, 0, V, -1, INT32_MAX, INT32_MIN};
         edge.resize(size_t(std::max(k, 1)), V - 1);
         return edge;
       }},
      {"too-long", [&](std::span<const int32_t> h, int) { return continuation(h, 1000); }},
      {"right-then-eos", [&](std::span<const int32_t> h, int k) {
         auto out = continuation(h, size_t(k));
         if (!out.empty()) out.back() = eos;
         return out;
       }},
      {"empty", [&](std::span<const int32_t>, int) { return std::vector<int32_t>{}; }},
  };
  for (size_t p = 0; p < prompts.size(); p += 4) {
    Session s0 = m->new_session();
    const Decoded plain = decode_plain(*m, s0, prompts[p], g);
    truth = plain.ids;
    prompt_len = prompts[p].size();
    for (auto& d : hostile) {
      for (int budget : {1, 2, 5, 48}) {  // proposals longer than what is left to emit
        GenerateOptions gb = g;
        gb.max_new = budget;
        Session sa = m->new_session(), sb = m->new_session();
        const Decoded want = decode_plain(*m, sa, prompts[p], gb);
        const Decoded got = decode_drafted(*m, sb, prompts[p], gb, &d, always_draft());
        ASSERT_TRUE(same_decoding(want, got)) << d.name() << " prompt " << p << " max_new " << budget;
        ASSERT_EQ(sa.length, sb.length) << d.name();
      }
    }
  }
}

// A stop id inside an accepted block ends the emission there, as in plain decoding.
TEST(DraftIdentity, StopsInsideTheBlock) {
  auto m = open_model(testing::tiny_model(3), 1);
  ASSERT_TRUE(m);
  const std::vector<int32_t> prompt = {5, 17, 200, 3, 99};
  GenerateOptions g;
  g.max_new = 30;
  Session s = m->new_session();
  const Decoded all = decode_plain(*m, s, prompt, g);
  for (size_t stop_at : {size_t(1), size_t(4), size_t(11)}) {
    GenerateOptions gs = g;
    gs.stop_ids = {all.ids[stop_at]};
    Session a = m->new_session(), b = m->new_session();
    const Decoded want = decode_plain(*m, a, prompt, gs);
    ScriptedDrafter oracle("oracle", [&](std::span<const int32_t> h, int k) {
      std::vector<int32_t> out;
      for (size_t i = h.size() - prompt.size(); i < all.ids.size() && int(out.size()) < k; ++i) out.push_back(all.ids[i]);
      return out;
    });
    const Decoded got = decode_drafted(*m, b, prompt, gs, &oracle, always_draft());
    ASSERT_TRUE(same_decoding(want, got)) << "stop at " << stop_at;
    EXPECT_EQ(a.length, b.length);
  }
  // A callback that says stop ends it too.
  Session a = m->new_session(), b = m->new_session();
  int left = 6;
  auto stop6 = [&](int32_t, std::span<const float>) { return --left > 0; };
  ASSERT_TRUE(generate(*m, a, prompt, g, stop6).ok());
  left = 6;
  NgramDrafter ngram;
  ASSERT_TRUE(generate_drafted(*m, b, prompt, g, &ngram, always_draft(), stop6).ok());
  EXPECT_EQ(a.length, b.length);
}

}  // namespace
}  // namespace deltafin
