// The k3-shaped preset (K3's routing shape, experts sized from --experts-gb)
// and experts generated straight into a store: the generator gives the bytes
// a complete checkpoint holds, and a store written from a spine-only
// checkpoint equals one prepared from the complete checkpoint.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "checkpoint/expert_generator.h"
#include "checkpoint/make_model.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "model/config.h"
#include "model/weights.h"
#include "store/manifest.h"
#include "store/prepare.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;

ModelConfig config_of(const ModelPreset& p) {
  auto cfg = ModelConfig::from_json(nlohmann::json::parse(preset_config_json(p).dump()));
  EXPECT_TRUE(cfg.ok()) << cfg.message();
  return cfg.ok() ? *cfg : ModelConfig{};
}

TEST(K3Shaped, NeedsExpertsGbAndOthersRefuseIt) {
  auto none = find_preset("k3-shaped");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("--experts-gb"), std::string::npos) << none.message();
  EXPECT_FALSE(find_preset("k3-shaped", -1).ok());
  for (const char* other : {"tiny", "small", "k3-full-sparse"}) {
    auto p = find_preset(other, 2.0);
    ASSERT_FALSE(p.ok()) << other;
    EXPECT_NE(p.message().find("k3-shaped"), std::string::npos) << p.message();
    EXPECT_TRUE(find_preset(other).ok()) << other;
  }
}

TEST(K3Shaped, ConfigHasK3RoutingShapeAndSchedule) {
  auto p = find_preset("k3-shaped", 40);
  ASSERT_TRUE(p.ok()) << p.message();
  const ModelConfig c = config_of(*p);
  EXPECT_EQ(c.moe.num_experts, 896);
  EXPECT_EQ(c.moe.top_k, 16);
  EXPECT_EQ(p->shared, 2);
  EXPECT_EQ(c.moe.shared_inter(), 2 * c.moe.expert_inter);
  EXPECT_LT(c.attn_res_block, c.num_layers);  // several AttnRes blocks
  int mla = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const bool want_mla = (l + 1) % 4 == 0 || l == c.num_layers - 1;
    EXPECT_EQ(c.attention[l], want_mla ? AttentionKind::MLA : AttentionKind::KDA) << "layer " << l;
    EXPECT_EQ(c.ffn[l], l == 0 ? FfnKind::Dense : FfnKind::MoE) << "layer " << l;
    mla += want_mla;
  }
  EXPECT_GE(mla, 2);
}

// Total expert bytes land near the budget; an expert is a few MB at 40 GB.
TEST(K3Shaped, ExpertWidthsFollowTheBudget) {
  for (double gb : {0.02, 0.5, 2.0, 40.0, 400.0}) {
    auto p = find_preset("k3-shaped", gb);
    ASSERT_TRUE(p.ok()) << p.message();
    const double total = double(preset_expert_bytes(*p)) * preset_moe_layers(*p) * p->experts;
    EXPECT_EQ(p->expert_inter % 32, 0);
    EXPECT_EQ(p->latent % 32, 0);
    EXPECT_NEAR(total / (gb * 1e9), 1.0, gb < 0.1 ? 0.3 : 0.051) << "experts_gb " << gb << ": " << total << " bytes";
    EXPECT_TRUE(ModelConfig::from_json(nlohmann::json::parse(preset_config_json(*p).dump())).ok());
  }
  auto p40 = find_preset("k3-shaped", 40);
  EXPECT_GT(preset_expert_bytes(*p40), 1'000'000u);
  EXPECT_LT(preset_expert_bytes(*p40), 4'000'000u);
  EXPECT_EQ(p40->latent, 512);
}

// Expert payload checksums of a store, [moe_index * experts + e].
std::vector<std::string> expert_sums(const std::string& store) {
  auto m = Manifest::load(store);
  EXPECT_TRUE(m.ok()) << m.message();
  std::vector<std::string> out;
  if (m.ok())
    for (const auto& x : m->experts) out.push_back(x.xxh3.hex());
  return out;
}

TEST(K3Shaped, GeneratedExpertsEqualTheCheckpointsAndTheStoreFromIt) {
  ScratchDir d("gen-experts");
  auto p = find_preset("tiny");
  ASSERT_TRUE(p.ok());
  const std::string full = d.str() + "/full", spine = d.str() + "/spine";
  ASSERT_TRUE(make_model(*p, full, 9).ok());
  ASSERT_TRUE(make_model(*p, spine, 9, ExpertOutput::GeneratorRecord).ok());

  // The spine checkpoint has no expert tensors; the generator makes their bytes.
  auto fck = Checkpoint::open(full);
  auto sck = Checkpoint::open(spine);
  ASSERT_TRUE(fck.ok() && sck.ok());
  EXPECT_EQ((*sck)->find(expert_tensor_name(1, 0, "w1", "weight_packed")), nullptr);
  EXPECT_EQ((*sck)->tensor_count() + size_t(preset_moe_layers(*p)) * p->experts * 6, (*fck)->tensor_count());
  auto g = load_expert_generator(spine);
  ASSERT_TRUE(g.ok()) << g.message();
  std::vector<uint8_t> buf(g->expert_bytes());
  for (auto [layer, e] : {std::pair{1, 0}, {3, 17}, {5, 31}}) {
    g->fill(layer, e, buf);
    size_t at = 0;
    for (const char* part : {"w1", "w2", "w3"})
      for (const char* kind : {"weight_packed", "weight_scale"}) {
        const TensorInfo* t = (*fck)->find(expert_tensor_name(layer, e, part, kind));
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(std::memcmp(buf.data() + at, t->data, t->nbytes), 0) << t->name;
        at += t->nbytes;
      }
    EXPECT_EQ(at, buf.size());
  }

  // Stores from both: same expert checksums (same bytes), same spine tensors.
  PrepareOptions o;
  o.quiet = true;
  fs::create_directories(d.str() + "/a");
  fs::create_directories(d.str() + "/b");
  o.model_dir = full, o.out_dir = d.str() + "/store-full", o.drives = {d.str() + "/a:500", d.str() + "/b:300"};
  ASSERT_TRUE(prepare_store(o).ok());
  o.model_dir = spine, o.out_dir = d.str() + "/store-gen";
  auto st = prepare_store(o);
  ASSERT_TRUE(st.ok()) << st.message();
  const auto a = expert_sums(d.str() + "/store-full"), b = expert_sums(d.str() + "/store-gen");
  ASSERT_EQ(a.size(), size_t(preset_moe_layers(*p)) * p->experts);
  EXPECT_EQ(a, b);
  auto ma = Manifest::load(d.str() + "/store-full"), mb = Manifest::load(d.str() + "/store-gen");
  ASSERT_TRUE(ma.ok() && mb.ok());
  EXPECT_EQ(ma->expert_bytes, mb->expert_bytes);
  bool record_in_identity = false;
  for (const auto& f : mb->source_files) record_in_identity |= f.name == kExpertGeneratorFile;
  EXPECT_TRUE(record_in_identity);
  // The generated store shares the spine checkpoint's shards (hard links); the other copies.
  EXPECT_EQ(fs::hard_link_count(d.str() + "/store-gen/spine/spine-layer-001.safetensors"), 2u);
  EXPECT_EQ(fs::hard_link_count(d.str() + "/store-full/spine/spine-layer-001.safetensors"), 1u);
  // The spine-only directory is smaller by the experts.
  uint64_t full_bytes = 0, spine_bytes = 0;
  for (const auto& e : fs::directory_iterator(full)) full_bytes += e.file_size();
  for (const auto& e : fs::directory_iterator(spine)) spine_bytes += e.file_size();
  EXPECT_LT(spine_bytes + uint64_t(preset_moe_layers(*p)) * p->experts * mb->expert_bytes, full_bytes + 65536);
}

TEST(K3Shaped, GeneratorRecordForAnotherModelIsRefused) {
  ScratchDir d("gen-mismatch");
  auto tiny = find_preset("tiny");
  auto shaped = find_preset("k3-shaped", 0.02);
  ASSERT_TRUE(tiny.ok() && shaped.ok());
  const std::string spine = d.str() + "/spine";
  ASSERT_TRUE(make_model(*tiny, spine, 3, ExpertOutput::GeneratorRecord).ok());
  testing::write_file(fs::path(spine) / kExpertGeneratorFile, ExpertGenerator{*shaped, 3}.record_json());
  PrepareOptions o;
  fs::create_directories(d.str() + "/a");
  o.quiet = true, o.model_dir = spine, o.out_dir = d.str() + "/store", o.drives = {d.str() + "/a:500"};
  auto st = prepare_store(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another model"), std::string::npos) << st.message();

  testing::write_file(fs::path(spine) / kExpertGeneratorFile, "{\"format\": \"deltafin-expert-generator\"}");
  st = prepare_store(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(kExpertGeneratorFile), std::string::npos) << st.message();
}

}  // namespace
}  // namespace deltafin
