// make-model's tiny and small presets: complete, loadable, deterministic, in
// the published layout (schedule, dtypes, expert record order, tokenizer).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/make_model.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "model/config.h"
#include "model/expert_source.h"
#include "model/weights.h"

namespace deltafin {
namespace {

using testing::read_file;
using testing::ScratchDir;

ModelPreset preset(const char* name) {
  auto p = find_preset(name);
  EXPECT_TRUE(p.ok()) << p.message();
  return *p;
}

// Every expert's six records lie back to back in one shard, in the order
// w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale.
void expect_expert_records_contiguous(const Checkpoint& ck, const ModelConfig& cfg) {
  int checked = 0;
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.ffn[l] != FfnKind::MoE) continue;
    for (int e = 0; e < cfg.moe.num_experts; ++e) {
      const TensorInfo* prev = nullptr;
      for (const char* part : {"w1", "w2", "w3"})
        for (const char* kind : {"weight_packed", "weight_scale"}) {
          const TensorInfo* t = ck.find(expert_tensor_name(l, e, part, kind));
          ASSERT_NE(t, nullptr) << expert_tensor_name(l, e, part, kind);
          if (prev) {
            ASSERT_EQ(t->file, prev->file) << t->name;
            ASSERT_EQ(t->file_offset, prev->file_offset + prev->nbytes) << t->name;
          }
          prev = t;
        }
      ++checked;
    }
  }
  EXPECT_EQ(checked, cfg.num_moe_layers() * cfg.moe.num_experts);
}

struct Loaded {
  std::unique_ptr<Checkpoint> ck;
  ModelConfig cfg;
};

Loaded load(const std::string& dir) {
  Loaded r;
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.ok()) << ck.message();
  if (!ck.ok()) return r;
  r.ck = std::move(*ck);
  auto cfg = ModelConfig::from_json(r.ck->config());
  EXPECT_TRUE(cfg.ok()) << cfg.message();
  if (cfg.ok()) r.cfg = *cfg;
  return r;
}

// The config carries the preset's structure: K3's schedule rule, dense layer 0.
void expect_structure(const ModelPreset& p, const ModelConfig& c) {
  EXPECT_EQ(c.hidden, p.hidden);
  EXPECT_EQ(c.num_layers, p.num_layers);
  EXPECT_EQ(c.attn_res_block, p.attn_res_block);
  EXPECT_LT(c.attn_res_block, c.num_layers);  // several AttnRes blocks
  ASSERT_EQ(int(c.attention.size()), p.num_layers);
  for (int l = 0; l < p.num_layers; ++l) {
    const bool mla = (l + 1) % 4 == 0 || l == p.num_layers - 1;
    EXPECT_EQ(c.attention[l], mla ? AttentionKind::MLA : AttentionKind::KDA) << "layer " << l;
    EXPECT_EQ(c.ffn[l], l == 0 ? FfnKind::Dense : FfnKind::MoE) << "layer " << l;
  }
  EXPECT_EQ(c.attention.back(), AttentionKind::MLA);
  EXPECT_EQ(c.moe.num_shared, 2);
  EXPECT_EQ(c.bos_id, p.text_ranks);
  EXPECT_EQ(c.eos_id, p.text_ranks + 2);
  EXPECT_EQ(c.pad_id, p.text_ranks + 255);
  EXPECT_EQ(c.vocab, p.text_ranks + 256);
}

TEST(CheckpointPresets, TinyIsCompleteAndBinds) {
  ScratchDir dir("tiny");
  const ModelPreset p = preset("tiny");
  ASSERT_TRUE(make_model(p, dir.str(), 1).ok());
  Loaded m = load(dir.str());
  ASSERT_TRUE(m.ck);
  expect_structure(p, m.cfg);
  EXPECT_EQ(int(m.ck->shards().size()), p.shards);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "model-00001-of-00003.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "generation_config.json"));

  auto w = ModelWeights::bind(*m.ck, m.cfg);
  ASSERT_TRUE(w.ok()) << w.message();
  auto src = CheckpointExpertSource::create(*m.ck, m.cfg);
  ASSERT_TRUE(src.ok()) << src.message();
  expect_expert_records_contiguous(*m.ck, m.cfg);

  // Value ranges that keep activations O(1): norm weights near 1, a small
  // correction bias, A_log per head with an exactly-zero padded tail.
  for (float v : w->final_norm) EXPECT_NEAR(v, 1.0f, 0.11f);
  for (float v : w->layers[1].correction_bias) EXPECT_LE(std::abs(v), 0.02f);
  const TensorInfo* alog = m.ck->find("language_model.model.layers.0.self_attn.A_log");
  ASSERT_NE(alog, nullptr);
  ASSERT_GT(alog->shape[0], m.cfg.kda.heads);
  std::vector<float> a(alog->numel());
  std::memcpy(a.data(), alog->data, alog->nbytes);
  for (int i = 0; i < int(a.size()); ++i) {
    if (i < m.cfg.kda.heads) {
      EXPECT_GT(a[i], 0.0f);
    } else {
      EXPECT_EQ(a[i], 0.0f);
    }
  }

  // Every expert's scale bytes are in the valid, realistic range.
  std::vector<ExpertWeights> ew(1);
  for (int e = 0; e < m.cfg.moe.num_experts; ++e) {
    const int id = e;
    ASSERT_TRUE((*src)->acquire(1, std::span<const int>(&id, 1), ew).ok());
  }
  const TensorInfo* sc = m.ck->find(expert_tensor_name(2, 5, "w2", "weight_scale"));
  ASSERT_NE(sc, nullptr);
  for (uint64_t i = 0; i < sc->nbytes; ++i) {
    EXPECT_GE(sc->data[i], 110);
    EXPECT_LE(sc->data[i], 125);
  }
}

TEST(CheckpointPresets, TinyTokenizerFiles) {
  ScratchDir dir("tiny-tok");
  const ModelPreset p = preset("tiny");
  ASSERT_TRUE(make_model(p, dir.str(), 3).ok());
  const std::string ranks = read_file(dir.path() / "tiktoken.model");
  std::istringstream in(ranks);
  std::string b64;
  int rank = 0, n = 0;
  while (in >> b64 >> rank) {
    EXPECT_EQ(rank, n);
    EXPECT_EQ(b64.size(), 4u);
    ++n;
  }
  EXPECT_EQ(n, 256);
  EXPECT_EQ(ranks.substr(0, 5), "AA== ");  // byte 0
  EXPECT_NE(ranks.find("QQ== 65\n"), std::string::npos);  // 'A'
  EXPECT_NE(ranks.find("/w== 255\n"), std::string::npos);

  auto tok = nlohmann::json::parse(read_file(dir.path() / "tokenizer_config.json"));
  const auto& dec = tok["added_tokens_decoder"];
  EXPECT_EQ(dec.size(), 256u);
  EXPECT_EQ(dec["256"]["content"], "[BOS]");
  EXPECT_EQ(dec["257"]["content"], "[EOS]");
  EXPECT_EQ(dec["258"]["content"], "<|end_of_msg|>");
  EXPECT_EQ(dec["259"]["content"], "<|open|>");
  EXPECT_EQ(dec["261"]["content"], "<|sep|>");
  EXPECT_EQ(dec["321"]["content"], "<osagent_mode>");
  EXPECT_EQ(dec["300"]["content"], "<|reserved_token_300|>");
  EXPECT_EQ(dec["510"]["content"], "[UNK]");
  EXPECT_EQ(dec["511"]["content"], "[PAD]");
  auto gen = nlohmann::json::parse(read_file(dir.path() / "generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], 258);
}

TEST(CheckpointPresets, SameSeedSameBytesOtherSeedOtherBytes) {
  ScratchDir a("seed-a"), b("seed-b"), c("seed-c");
  const ModelPreset p = preset("tiny");
  ASSERT_TRUE(make_model(p, a.str(), 11).ok());
  ASSERT_TRUE(make_model(p, b.str(), 11).ok());
  ASSERT_TRUE(make_model(p, c.str(), 12).ok());
  for (const auto& entry : std::filesystem::directory_iterator(a.path())) {
    const auto name = entry.path().filename();
    const std::string fa = read_file(a.path() / name), fb = read_file(b.path() / name), fc = read_file(c.path() / name);
    EXPECT_EQ(fa, fb) << name;
    if (name.extension() == ".safetensors") {
      EXPECT_EQ(fa.size(), fc.size()) << name;  // same layout ...
      EXPECT_NE(fa, fc) << name;                // ... other weights
    }
  }
}

// Each tensor is a pure function of (seed, name, shape): regenerating any of
// them gives the bytes in the file, and another seed gives other bytes.
void expect_regenerates(const ModelPreset& p, const Checkpoint& ck, uint64_t seed, size_t stride) {
  size_t i = 0, compared = 0;
  for (const auto& shard : ck.shards())
    for (const auto& t : shard->tensors()) {
      if (i++ % stride) continue;
      TensorSpec spec{t.name, t.dtype, t.shape};
      std::vector<uint8_t> mine(t.nbytes), other(t.nbytes);
      fill_random_tensor(p, seed, spec, mine);
      fill_random_tensor(p, seed + 1, spec, other);
      EXPECT_EQ(std::memcmp(mine.data(), t.data, t.nbytes), 0) << t.name;
      if (t.nbytes >= 16 && t.name.find("A_log") == std::string::npos) {
        EXPECT_NE(mine, other) << t.name;
      }
      ++compared;
    }
  EXPECT_GT(compared, 20u);
}

TEST(CheckpointPresets, SmallIsRealisticAndDeterministic) {
  ScratchDir dir("small");
  const ModelPreset p = preset("small");
  ASSERT_TRUE(make_model(p, dir.str(), 5).ok());
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) bytes += e.file_size();
  EXPECT_GT(bytes, 1'000'000'000u);
  EXPECT_LT(bytes, 2'000'000'000u);
  Loaded m = load(dir.str());
  ASSERT_TRUE(m.ck);
  expect_structure(p, m.cfg);
  EXPECT_GE(m.cfg.moe.num_experts, 256);
  EXPECT_EQ(m.cfg.moe.top_k, 16);
  auto w = ModelWeights::bind(*m.ck, m.cfg);
  ASSERT_TRUE(w.ok()) << w.message();
  auto src = CheckpointExpertSource::create(*m.ck, m.cfg);
  ASSERT_TRUE(src.ok()) << src.message();
  expect_expert_records_contiguous(*m.ck, m.cfg);
  expect_regenerates(p, *m.ck, 5, 97);
}

TEST(CheckpointPresets, UnknownPresetIsAnError) {
  auto p = find_preset("huge");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("huge"), std::string::npos);
}

TEST(CheckpointPresets, ShardSplitKeepsExpertsWhole) {
  const ModelPreset p = preset("tiny");
  auto groups = preset_tensor_groups(p);
  for (int n : {1, 2, 3, 7, 16}) {
    auto shards = split_into_shards(groups, n);
    ASSERT_TRUE(shards.ok()) << shards.message();
    ASSERT_EQ(int(shards->size()), n);
    size_t total = 0;
    for (const auto& s : *shards) {
      EXPECT_FALSE(s.empty());
      total += s.size();
      // A shard never starts in the middle of an expert.
      if (s.front().name.find(".experts.") != std::string::npos) {
        EXPECT_NE(s.front().name.find(".w1.weight_packed"), std::string::npos) << s.front().name;
      }
    }
    size_t expected = 0;
    for (const auto& g : groups) expected += g.size();
    EXPECT_EQ(total, expected);
  }
  // More shards than groups cannot all be filled.
  EXPECT_FALSE(split_into_shards(groups, int(groups.size()) + 1).ok());
}

}  // namespace
}  // namespace deltafin
