// make-model --preset k3-full-sparse: K3's real configuration and every text
// tensor's name, dtype and shape, data left as holes. `deltafin inspect`
// validates it and its memory plan equals the arithmetic of docs/design/checkpoint.md and
// docs/design/checkpoint.md.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "checkpoint/make_model.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "model/config.h"
#include "model/memory_plan.h"
#include "model/weights.h"

namespace deltafin {
namespace {

using testing::ScratchDir;

// Spine bytes from the shape tables of docs/design/checkpoint.md, written out
// independently of the writer's tensor list.
uint64_t k3_spine_bytes() {
  const uint64_t H = 7168, V = 163840, bf = 2, f32 = 4;
  const uint64_t global = 2 * V * H * bf + 3 * H * bf;  // embed, lm_head, norm, out res norm + proj
  const uint64_t common = 6 * H * bf;                    // 2 layer norms, 2 res norms, 2 res proj rows
  const uint64_t kda = 4 * 12288 * H * bf + 128 * H * bf + 12288 * 128 * bf + 96 * H * bf + H * 12288 * bf +
                       3 * 12288 * 4 * f32 + 128 * f32 + 12288 * f32 + 128 * f32;
  const uint64_t mla = 1536 * H * bf + 1536 * bf + 18432 * 1536 * bf + 576 * H * bf + 512 * bf + 24576 * 512 * bf +
                       12288 * H * bf + H * 12288 * bf;
  const uint64_t dense = 3 * 33792 * H * bf;
  const uint64_t moe = 896 * H * bf + 896 * f32 + 3584 * H * bf + 3584 * bf + H * 3584 * bf + 3 * 6144 * H * bf;
  return global + 93 * common + 69 * kda + 24 * mla + dense + 92 * moe;
}

TEST(CheckpointK3Sparse, WrittenValidatedAndPlanned) {
  ScratchDir dir("k3-sparse"), scratch("k3-cmd");
  auto preset = find_preset("k3-full-sparse");
  ASSERT_TRUE(preset.ok());
  ASSERT_TRUE(make_model(*preset, dir.str(), 1).ok());

  // 96 shards with K3's 6-digit spelling, holes instead of data.
  uint64_t allocated = 0, apparent = 0;
  for (int s = 1; s <= 96; ++s) {
    const auto path = dir.path() / fmt::format("model-{:05d}-of-000096.safetensors", s);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    allocated += uint64_t(st.st_blocks) * 512;
    apparent += uint64_t(st.st_size);
  }
  EXPECT_GT(apparent, 1'500'000'000'000u);
  EXPECT_LT(allocated, 1'000'000'000u);

  auto r = testing::run_deltafin("inspect --json --model " + dir.str(), scratch.path());
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  const uint64_t expert = 17'547'264;  // 3 x (3072 x 3584 / 2 + 3072 x 3584 / 32)
  EXPECT_EQ(j["shards"], 96);
  EXPECT_EQ(j["tensors"], 92u * 896 * 6 + 2455 + 1 + 4);  // K3 text tensors (docs/design/checkpoint.md); the vision tower is not written
  EXPECT_EQ(j["moe_layers"], 92);
  EXPECT_EQ(j["experts_total"], 82'432);
  EXPECT_EQ(j["expert_bytes"], expert);
  EXPECT_EQ(j["expert_bytes_per_cold_token"], 16u * 92 * expert);  // about 25.8 GB
  EXPECT_EQ(j["routed_expert_bytes"], 82'432u * expert);           // 1.446e12
  EXPECT_EQ(j["kda_layers"], 69);
  EXPECT_EQ(j["kda_state_bytes_per_layer"], 6'881'280u);
  EXPECT_EQ(j["kda_state_bytes"], 69u * 6'881'280);  // 474.8 MB
  EXPECT_EQ(j["mla_layers"], 24);
  EXPECT_EQ(j["mla_cache_bytes_per_token"], 24u * 576 * 4);  // 55,296 B
  EXPECT_EQ(j["spine_bytes"], k3_spine_bytes());
  EXPECT_GT(j["largest_file_offset"].get<uint64_t>(), 4ull << 30);

  // In process: the config is recognised as K3's, and every expert's six
  // records are contiguous, in order, in one shard.
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.ok()) << ck.message();
  auto cfg = ModelConfig::from_json((*ck)->config());
  ASSERT_TRUE(cfg.ok()) << cfg.message();
  EXPECT_TRUE(cfg->is_k3_full);
  const MemoryPlan plan = plan_from_config(*cfg);
  EXPECT_EQ(plan.expert_bytes_per_cold_token, j["expert_bytes_per_cold_token"].get<uint64_t>());
  uint64_t beyond_4g = 0;
  for (int l = 1; l < 93; ++l)
    for (int e = 0; e < 896; ++e) {
      const TensorInfo* prev = nullptr;
      for (const char* part : {"w1", "w2", "w3"})
        for (const char* kind : {"weight_packed", "weight_scale"}) {
          const TensorInfo* t = (*ck)->find(expert_tensor_name(l, e, part, kind));
          ASSERT_NE(t, nullptr);
          if (prev) {
            ASSERT_TRUE(t->file == prev->file && t->file_offset == prev->file_offset + prev->nbytes) << t->name;
          }
          prev = t;
        }
      beyond_4g += prev->file_offset > (4ull << 30);
    }
  EXPECT_GT(beyond_4g, 10'000u);
}

}  // namespace
}  // namespace deltafin
