// Manifest round trip and validation, placement proportions, route traces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "store/manifest.h"
#include "store/placement.h"

namespace deltafin {
namespace {

Manifest sample() {
  Manifest m;
  m.store_id = "abc123";
  m.source_dir = "/src";
  m.source_files = {{"config.json", 10, std::string(64, 'a')}};
  m.spine_files = {{"spine-embed.safetensors", 100, {1, 2}}};
  m.num_layers = 3;
  m.num_experts = 2;
  m.expert_bytes = 5000;
  m.span_bytes = 8192;
  m.moe_layers = {1, 2};
  m.drives = {{"/d0", 1000, {{"layer-001.pack", 8192 * 2, {}}, {"layer-002.pack", 8192, {}}}},
              {"/d1", 500, {{"layer-002.pack", 8192 * 2, {}}}}};
  m.experts = {{{1, 1}, {{0, 0, 0}}}, {{2, 2}, {{0, 0, 8192}}}, {{3, 3}, {{0, 1, 0}, {1, 0, 0}}}, {{4, 4}, {{1, 0, 8192}}}};
  return m;
}

TEST(StoreManifest, RoundTrip) {
  Manifest m = sample();
  auto p = Manifest::parse(m.to_json(), "t");
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->to_json(), m.to_json());
  EXPECT_EQ(p->expert(2, 0)->at.size(), 2u);
  EXPECT_EQ(p->expert(2, 0)->xxh3, (Hash128{3, 3}));
  EXPECT_EQ(p->expert(0, 0), nullptr);  // dense layer
  EXPECT_EQ(p->pack_dir(1), "/d1/deltafin-abc123");
}

// The manifest's own checksum: any changed byte is refused; removing it is
// refused for version 2; a version 1 manifest (none) is read, unsealed.
TEST(StoreManifest, OwnChecksumCoversEveryByte) {
  const std::string text = sample().to_json();
  ASSERT_NE(text.find("\"manifest_xxh3\": \""), std::string::npos);
  auto ok = Manifest::parse(text, "t");
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_TRUE(ok->sealed);
  for (size_t at = 0; at < text.size(); at += 7) {
    std::string bad = text;
    bad[at] = bad[at] == '0' ? '1' : '0';
    auto p = Manifest::parse(bad, "t");
    EXPECT_FALSE(p.ok()) << "byte " << at << " changed and accepted";
  }
  auto j = nlohmann::ordered_json::parse(text);
  j.erase("manifest_xxh3");
  auto unsealed = Manifest::parse(j.dump(1), "t");
  ASSERT_FALSE(unsealed.ok());
  EXPECT_NE(unsealed.message().find("no manifest_xxh3 field"), std::string::npos) << unsealed.message();
  j["version"] = 1;
  auto v1 = Manifest::parse(j.dump(1), "t");
  ASSERT_TRUE(v1.ok()) << v1.message();
  EXPECT_FALSE(v1->sealed);
  EXPECT_EQ(v1->version, 1);
  // A store from before version 3 has no model type or expert format: it holds K3's MXFP4 experts.
  j["model"].erase("model_type");
  j["model"].erase("expert_format");
  auto old_store = Manifest::parse(j.dump(1), "t");
  ASSERT_TRUE(old_store.ok()) << old_store.message();
  EXPECT_EQ(old_store->model_type, "kimi_k3");
  EXPECT_EQ(old_store->expert_format, "mxfp4");
  // The version 1 store is written back in the current version, sealed.
  auto again = Manifest::parse(v1->to_json(), "t");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_TRUE(again->sealed);
  EXPECT_EQ(again->version, kManifestVersion);
}

TEST(StoreManifest, RejectsInconsistentPlacements) {
  auto expect_error = [](Manifest m, const char* what) {
    auto p = Manifest::parse(m.to_json(), "t");
    ASSERT_FALSE(p.ok()) << what;
    EXPECT_NE(p.message().find(what), std::string::npos) << p.message();
  };
  Manifest m = sample();
  m.experts[1].at[0].offset = 4096;
  expect_error(m, "overlap");
  m = sample();
  m.experts[1].at[0].offset = 100;
  expect_error(m, "not 4 KiB aligned");
  m = sample();
  m.experts[3].at[0].offset = 8192 * 2;
  expect_error(m, "runs past the end");
  m = sample();
  m.experts[2].at[1].drive = 0;
  expect_error(m, "same drive");
  m = sample();
  m.experts[0].at[0].drive = 7;
  expect_error(m, "experts[0].at[0][0] (layer 1 expert 0, placement [7, 0, 0]): drive 7 does not exist");
  m = sample();
  m.experts[0].at.clear();
  expect_error(m, "no placement");
  m = sample();
  m.span_bytes = 4096;
  expect_error(m, "model.span_bytes 4096 != model.expert_bytes 5000");
  m = sample();
  m.experts[3].at[0].offset = ~0ull - 4095;  // aligned; offset + span wraps around 2^64
  expect_error(m, "offset 18446744073709547520 + model.span_bytes 8192 runs past the end of layer-002.pack");
  m = sample();
  m.drives[1].packs[0].size += 8192;  // a span nobody uses
  expect_error(m, "drives[1].packs[0].size 24576 (layer-002.pack): its placements hold 2 spans");
  m = sample();
  m.experts[1].at[0].offset = 4096;
  expect_error(m, "experts[0].at[0][0] (layer 1 expert 0) and experts[0].at[1][0] (layer 1 expert 1) overlap");
  EXPECT_FALSE(Manifest::parse("{\"format\": \"deltafin-store\"}", "t").ok());
  std::string text = sample().to_json();
  text.replace(text.find("\"version\": 3"), 12, "\"version\": 4");
  auto v4 = Manifest::parse_contents(text, "t");
  ASSERT_FALSE(v4.ok());
  EXPECT_NE(v4.message().find("manifest version 4 is not supported"), std::string::npos) << v4.message();
  EXPECT_FALSE(Manifest::parse("[", "t").ok());
}

TEST(StorePlacement, ProportionalToRatesWithReplicasOnOtherDrives) {
  auto p = plan_placement(4, 100, 4096, {3000, 1000}, default_hot_order(4, 100), 40);
  ASSERT_TRUE(p.ok()) << p.message();
  for (int m = 0; m < 4; ++m) {
    int on0 = 0;
    for (int e = 0; e < 100; ++e) on0 += p->copies[m * 100 + e][0] == 0;
    EXPECT_NEAR(on0, 75, 1) << "layer " << m;
  }
  int replicated = 0;
  for (const auto& c : p->copies) {
    if (c.size() == 2) {
      replicated++;
      EXPECT_NE(c[0], c[1]);
    }
  }
  EXPECT_EQ(replicated, 40);
  // Hot order interleaves layers: 40 replicas = experts 0..9 of each layer.
  for (int m = 0; m < 4; ++m) EXPECT_EQ(p->copies[m * 100 + 9].size(), 2u);
  EXPECT_FALSE(plan_placement(1, 4, 4096, {1000}, default_hot_order(1, 4), 1).ok());  // replicas need 2 drives
}

TEST(StorePlacement, ReplicasBalanceEveryLayer) {
  // 4 identical drives, every expert replicated: within each MoE layer every
  // drive holds 2 x 96 / 4 = 48 copies (within 1), and the replicas spread
  // over all 6 pairs of drives (so load can move between any two).
  const int M = 5, E = 96, D = 4;
  auto p = plan_placement(M, E, 4096, std::vector<double>(D, 7000), default_hot_order(M, E), uint64_t(M) * E);
  ASSERT_TRUE(p.ok()) << p.message();
  for (int m = 0; m < M; ++m) {
    std::vector<int> per_drive(D, 0);
    std::vector<std::vector<int>> pair(D, std::vector<int>(D, 0));
    for (int e = 0; e < E; ++e) {
      const auto& c = p->copies[size_t(m) * E + e];
      ASSERT_EQ(c.size(), 2u);
      ASSERT_NE(c[0], c[1]);
      for (int d : c) per_drive[size_t(d)]++;
      pair[size_t(std::min(c[0], c[1]))][size_t(std::max(c[0], c[1]))]++;
    }
    for (int d = 0; d < D; ++d) EXPECT_NEAR(per_drive[size_t(d)], 2.0 * E / D, 1.0) << "layer " << m << " drive " << d;
    for (int a = 0; a < D; ++a)
      for (int b = a + 1; b < D; ++b) EXPECT_NEAR(pair[a][b], E / 6.0, 2.0) << "layer " << m << " pair " << a << b;
  }
  // Drives of rates 3:1:... : a layer's copies follow the rates within a copy
  // (replicas of half the experts, so the layer's bytes are 1.5 x 96 copies).
  auto q = plan_placement(2, E, 4096, {3000, 1000, 2000}, default_hot_order(2, E), uint64_t(E));
  ASSERT_TRUE(q.ok());
  for (int m = 0; m < 2; ++m) {
    std::vector<int> per_drive(3, 0);
    for (int e = 0; e < E; ++e)
      for (int d : q->copies[size_t(m) * E + e]) per_drive[size_t(d)]++;
    EXPECT_NEAR(per_drive[0], 1.5 * E / 2, 1.0) << "layer " << m;
    EXPECT_NEAR(per_drive[1], 1.5 * E / 6, 1.0) << "layer " << m;
    EXPECT_NEAR(per_drive[2], 1.5 * E / 3, 1.0) << "layer " << m;
  }
}

TEST(StoreRouteTrace, BothFormatsAndErrors) {
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("route-{}.txt", ::getpid())).string();
  {
    std::ofstream f(path);
    f << "# layer expert count\n1 5 3\n2 7\n\n2 7\n{\"pos\":0,\"layer\":1,\"experts\":[9,5]}\n";
  }
  auto t = read_route_trace(path, {1, 2}, 16);
  ASSERT_TRUE(t.ok()) << t.message();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0], std::make_pair(0, 5));  // 3 + 1
  EXPECT_EQ((*t)[1], std::make_pair(1, 7));  // 2
  EXPECT_EQ((*t)[2], std::make_pair(0, 9));  // 1
  {
    std::ofstream f(path);
    f << "1 5\n0 3\n";
  }
  auto bad = read_route_trace(path, {1, 2}, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(":2: layer 0 is not an MoE layer"), std::string::npos) << bad.message();
  {
    std::ofstream f(path);
    f << "1 99\n";
  }
  EXPECT_FALSE(read_route_trace(path, {1, 2}, 16).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace deltafin
