// make-model's Qwen3 presets (checkpoint/qwen3_presets.h, qwen3_writer.h): the
// Hub's tensor names, dtypes and shapes, the block-FP8 format, tied
// embeddings, determinism, the CLI and the metadata-only released configs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/qwen3_writer.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "core/dtype.h"

namespace deltafin {
namespace {

using testing::read_file;
using testing::ScratchDir;

Qwen3Preset preset(const char* name, const char* format = "bf16", int vocab = 0) {
  auto p = find_qwen3_preset(name, Qwen3PresetOptions{format, vocab, 0});
  EXPECT_TRUE(p.ok()) << p.message();
  return *p;
}

std::unique_ptr<Checkpoint> write_and_open(const Qwen3Preset& p, const ScratchDir& dir, uint64_t seed) {
  Status s = write_qwen3_checkpoint(p, dir.str(), seed);
  EXPECT_TRUE(s.ok()) << s.message();
  auto ck = Checkpoint::open(dir.str());
  EXPECT_TRUE(ck.ok()) << ck.message();
  return ck.ok() ? std::move(ck.value()) : nullptr;
}

struct Expect {
  std::string name;
  std::vector<int64_t> shape;
  bool linear;  // FP8 in an FP8 checkpoint
};

// The tensors of the tiny presets, spelled out here (not taken from the writer).
std::vector<Expect> expected_tiny(bool moe, bool tied, int64_t vocab = 512) {
  std::vector<Expect> e = {{"model.embed_tokens.weight", {vocab, 256}, false}, {"model.norm.weight", {256}, false}};
  if (!tied) e.push_back({"lm_head.weight", {vocab, 256}, false});
  for (int l = 0; l < 4; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    e.push_back({p + "input_layernorm.weight", {256}, false});
    e.push_back({p + "post_attention_layernorm.weight", {256}, false});
    e.push_back({p + "self_attn.q_proj.weight", {256, 256}, true});
    e.push_back({p + "self_attn.k_proj.weight", {128, 256}, true});
    e.push_back({p + "self_attn.v_proj.weight", {128, 256}, true});
    e.push_back({p + "self_attn.o_proj.weight", {256, 256}, true});
    e.push_back({p + "self_attn.q_norm.weight", {64}, false});
    e.push_back({p + "self_attn.k_norm.weight", {64}, false});
    if (moe && l != 1) {
      e.push_back({p + "mlp.gate.weight", {16, 256}, false});
      for (int x = 0; x < 16; ++x) {
        const std::string q = p + "mlp.experts." + std::to_string(x) + ".";
        e.push_back({q + "gate_proj.weight", {192, 256}, true});
        e.push_back({q + "up_proj.weight", {192, 256}, true});
        e.push_back({q + "down_proj.weight", {256, 192}, true});
      }
    } else {
      e.push_back({p + "mlp.gate_proj.weight", {512, 256}, true});
      e.push_back({p + "mlp.up_proj.weight", {512, 256}, true});
      e.push_back({p + "mlp.down_proj.weight", {256, 512}, true});
    }
  }
  return e;
}

void expect_layout(const Checkpoint& ck, const std::vector<Expect>& want, bool fp8) {
  size_t count = 0;
  for (const auto& w : want) {
    const bool q = fp8 && w.linear;
    auto t = ck.require(w.name, q ? DType::F8_E4M3 : DType::BF16, w.shape);
    EXPECT_TRUE(t.ok()) << t.message();
    ++count;
    if (!q) continue;
    const std::vector<int64_t> s = {(w.shape[0] + 127) / 128, (w.shape[1] + 127) / 128};
    auto sc = ck.require(w.name + "_scale_inv", DType::F32, s);
    EXPECT_TRUE(sc.ok()) << sc.message();
    ++count;
  }
  EXPECT_EQ(ck.tensor_count(), count);
}

float bf16_at(const TensorInfo& t, uint64_t i) {
  uint16_t b;
  std::memcpy(&b, t.data + 2 * i, 2);
  return bf16_to_f32(b);
}

TEST(Qwen3Presets, MoeTinyHasTheHubLayoutAndConfig) {
  ScratchDir dir("qwen3-moe");
  auto ck = write_and_open(preset("qwen3-moe-tiny"), dir, 1);
  ASSERT_TRUE(ck);
  expect_layout(*ck, expected_tiny(true, false), false);
  const auto& c = ck->config();
  EXPECT_EQ(c["model_type"], "qwen3_moe");
  EXPECT_EQ(c["architectures"][0], "Qwen3MoeForCausalLM");
  EXPECT_EQ(c["hidden_size"], 256);
  EXPECT_EQ(c["num_hidden_layers"], 4);
  EXPECT_EQ(c["num_attention_heads"], 4);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["head_dim"], 64);
  EXPECT_EQ(c["vocab_size"], 512);
  EXPECT_EQ(c["intermediate_size"], 512);
  EXPECT_EQ(c["moe_intermediate_size"], 192);
  EXPECT_EQ(c["num_experts"], 16);
  EXPECT_EQ(c["num_experts_per_tok"], 4);
  EXPECT_EQ(c["norm_topk_prob"], true);
  EXPECT_EQ(c["decoder_sparse_step"], 1);
  EXPECT_EQ(c["mlp_only_layers"], nlohmann::json::array({1}));
  EXPECT_EQ(c["rope_theta"], 1000000.0);
  EXPECT_TRUE(c["rope_scaling"].is_null());
  EXPECT_TRUE(c["sliding_window"].is_null());
  EXPECT_EQ(c["rms_norm_eps"], 1e-6);
  EXPECT_EQ(c["tie_word_embeddings"], false);
  EXPECT_EQ(c["bos_token_id"], 510);
  EXPECT_EQ(c["eos_token_id"], 511);
  EXPECT_EQ(c["torch_dtype"], "bfloat16");
  EXPECT_FALSE(c.contains("quantization_config"));
  for (const char* k : {"use_sliding_window", "max_window_layers", "attention_dropout", "output_router_logits",
                        "router_aux_loss_coef", "initializer_range", "use_cache", "attention_bias", "hidden_act"})
    EXPECT_TRUE(c.contains(k)) << k;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "generation_config.json"));
  EXPECT_EQ(ck->shards().size(), 2u);
}

// Values have the sizes the presets promise: norms 1 +- 0.1, projections of
// variance 1/fan_in, the embedding of unit variance.
TEST(Qwen3Presets, WeightsAreScaledByRole) {
  ScratchDir dir("qwen3-scale");
  auto ck = write_and_open(preset("qwen3-moe-tiny"), dir, 3);
  ASSERT_TRUE(ck);
  auto rms = [&](const char* name) {
    const TensorInfo* t = ck->find(name);
    EXPECT_NE(t, nullptr) << name;
    double s = 0;
    for (uint64_t i = 0; i < t->numel(); ++i) s += double(bf16_at(*t, i)) * bf16_at(*t, i);
    return std::sqrt(s / double(t->numel()));
  };
  EXPECT_NEAR(rms("model.embed_tokens.weight"), 1.0, 0.02);
  EXPECT_NEAR(rms("model.layers.0.self_attn.q_proj.weight"), 1.0 / 16, 0.002);
  EXPECT_NEAR(rms("model.layers.0.mlp.experts.3.down_proj.weight"), 1.0 / std::sqrt(192.0), 0.003);
  const TensorInfo* n = ck->find("model.layers.2.self_attn.k_norm.weight");
  ASSERT_NE(n, nullptr);
  for (uint64_t i = 0; i < n->numel(); ++i) EXPECT_NEAR(bf16_at(*n, i), 1.0, 0.1 + 1.0 / 256);  // plus BF16 rounding
}

TEST(Qwen3Presets, Fp8StoresEveryLinearAsE4m3BlocksOfTheBf16Values) {
  ScratchDir bdir("qwen3-bf16"), fdir("qwen3-fp8");
  auto bf = write_and_open(preset("qwen3-moe-tiny"), bdir, 2);
  auto f8 = write_and_open(preset("qwen3-moe-tiny", "fp8"), fdir, 2);
  ASSERT_TRUE(bf && f8);
  expect_layout(*f8, expected_tiny(true, false), true);
  const auto& q = f8->config()["quantization_config"];
  EXPECT_EQ(q["quant_method"], "fp8");
  EXPECT_EQ(q["fmt"], "e4m3");
  EXPECT_EQ(q["activation_scheme"], "dynamic");
  EXPECT_EQ(q["weight_block_size"], nlohmann::json::array({128, 128}));
  size_t linears = 0;
  for (const auto& w : expected_tiny(true, false)) {
    const TensorInfo* b = bf->find(w.name);
    const TensorInfo* f = f8->find(w.name);
    ASSERT_TRUE(b && f) << w.name;
    if (!w.linear) {  // embedding, norms, router, lm_head: the same BF16 bytes
      ASSERT_EQ(f->dtype, DType::BF16) << w.name;
      EXPECT_EQ(std::memcmp(b->data, f->data, b->nbytes), 0) << w.name;
      continue;
    }
    ++linears;
    const TensorInfo* s = f8->find(w.name + "_scale_inv");
    ASSERT_NE(s, nullptr);
    const int64_t rows = w.shape[0], cols = w.shape[1], bc = s->shape[1];
    std::vector<float> scale(s->numel());
    std::memcpy(scale.data(), s->data, s->nbytes);
    for (float x : scale) ASSERT_TRUE(std::isfinite(x) && x > 0) << w.name;
    std::vector<float> block_max(scale.size(), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t code = f->data[r * cols + c];
        ASSERT_FALSE(e4m3_is_nan(code)) << w.name;
        const float sc = scale[size_t((r / 128) * bc + c / 128)];
        const float deq = e4m3_to_f32(code) * sc, ref = bf16_at(*b, uint64_t(r * cols + c));
        // Half a step of E4M3: 2^-4 relative for normals, 2^-10 x scale for subnormals.
        ASSERT_LE(std::fabs(deq - ref), std::fabs(ref) * 0.0625f + sc * 0x1p-10f + 1e-12f)
            << w.name << " [" << r << "," << c << "]";
        float& m = block_max[size_t((r / 128) * bc + c / 128)];
        m = std::max(m, std::fabs(ref));
      }
    // scale = max|w| / 448: the largest value of each block maps onto 448.
    for (size_t i = 0; i < scale.size(); ++i) EXPECT_FLOAT_EQ(scale[i], block_max[i] / 448.0f) << w.name;
  }
  EXPECT_EQ(linears, 4 * 4 + 3 * 16 * 3 + 3u);
}

TEST(Qwen3Presets, DenseTinyTiesTheEmbedding) {
  ScratchDir dir("qwen3-dense");
  auto ck = write_and_open(preset("qwen3-tiny"), dir, 1);
  ASSERT_TRUE(ck);
  expect_layout(*ck, expected_tiny(false, true), false);
  EXPECT_EQ(ck->find("lm_head.weight"), nullptr);
  const auto& c = ck->config();
  EXPECT_EQ(c["model_type"], "qwen3");
  EXPECT_EQ(c["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_EQ(c["tie_word_embeddings"], true);
  EXPECT_FALSE(c.contains("num_experts"));
  ScratchDir fdir("qwen3-dense-fp8");
  auto f8 = write_and_open(preset("qwen3-tiny", "fp8"), fdir, 1);
  ASSERT_TRUE(f8);
  expect_layout(*f8, expected_tiny(false, true), true);
}

std::string shard_bytes(const ScratchDir& d) {
  std::string all;
  for (const char* n : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
    all += read_file(d.path() / n);
  return all;
}

TEST(Qwen3Presets, DeterministicPerSeed) {
  ScratchDir a("qwen3-a"), b("qwen3-b"), c("qwen3-c");
  for (const char* fmt : {"bf16", "fp8"}) {
    const auto p = preset("qwen3-moe-tiny", fmt);
    ASSERT_TRUE(write_qwen3_checkpoint(p, a.str(), 7).ok());
    ASSERT_TRUE(write_qwen3_checkpoint(p, b.str(), 7).ok());
    ASSERT_TRUE(write_qwen3_checkpoint(p, c.str(), 8).ok());
    const std::string x = shard_bytes(a), y = shard_bytes(b), z = shard_bytes(c);
    EXPECT_GT(x.size(), 1000000u) << fmt;
    EXPECT_EQ(x, y) << fmt;
    EXPECT_EQ(x.size(), z.size()) << fmt;
    EXPECT_NE(x, z) << fmt;
  }
}

TEST(Qwen3Presets, CliWritesTheSameCheckpointAndTakesVocab) {
  ScratchDir dir("qwen3-cli");
  const auto cli = dir.path() / "cli", lib = dir.path() / "lib";
  auto r = testing::run_deltafin(
      "make-model --preset qwen3-moe-tiny --expert-format fp8 --seed 4 --out " + cli.string(), dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(write_qwen3_checkpoint(preset("qwen3-moe-tiny", "fp8"), lib.string(), 4).ok());
  for (const char* n : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json", "config.json", "generation_config.json"})
    EXPECT_EQ(read_file(cli / n), read_file(lib / n)) << n;

  const auto big = dir.path() / "big";
  r = testing::run_deltafin("make-model --preset qwen3-tiny --vocab 1000 --out " + big.string(), dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  auto ck = Checkpoint::open(big.string());
  ASSERT_TRUE(ck.ok()) << ck.message();
  EXPECT_EQ(ck.value()->config()["vocab_size"], 1000);
  EXPECT_TRUE(ck.value()->require("model.embed_tokens.weight", DType::BF16, {1000, 256}).ok());
  EXPECT_EQ(ck.value()->config()["eos_token_id"], 511);
  // Qwen3's own vocabulary brings its tokenizer's special ids.
  auto q = find_qwen3_preset("qwen3-moe-tiny", Qwen3PresetOptions{"bf16", 151936, 0});
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->vocab, 151936);
  EXPECT_EQ(q->bos_id, 151643);
  EXPECT_EQ(q->eos_id, 151645);
  EXPECT_EQ(qwen3_config_json(*q)["eos_token_id"], 151645);

  for (const char* bad : {"--preset qwen3-moe-tiny --expert-format fp4", "--preset qwen3-tiny --experts-gb 1",
                          "--preset qwen3-235b-shaped", "--preset tiny --expert-format fp8",
                          "--preset qwen3-tiny --vocab -3", "--preset qwen3-tiny --vocab 300"}) {
    r = testing::run_deltafin(std::string("make-model ") + bad + " --out " + (dir.path() / "x").string(), dir.path());
    EXPECT_TRUE(r.exited) << bad;
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.err.find("error"), std::string::npos) << bad << ": " << r.err;
  }
}

TEST(Qwen3Presets, ShapedPresetSizesTheExpertsToTheBudget) {
  auto p = find_qwen3_preset("qwen3-235b-shaped", Qwen3PresetOptions{"bf16", 0, 200});
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->num_layers, 94);
  EXPECT_EQ(p->experts, 128);
  EXPECT_EQ(p->top_k, 8);
  EXPECT_EQ(p->hidden, 4096);
  EXPECT_EQ(p->heads, 64);
  EXPECT_EQ(p->kv_heads, 4);
  EXPECT_EQ(p->vocab, 151936);
  EXPECT_EQ(p->moe_inter % 128, 0);
  // 200 GB / (94 x 128 x 3 x 4096 x 2 bytes) = 676 -> 640 (the nearest multiple of 128).
  EXPECT_EQ(p->moe_inter, 640);
  EXPECT_NEAR(double(qwen3_expert_bytes_total(*p)) / 1e9, 200, 0.06 * 200);
  auto f = find_qwen3_preset("qwen3-235b-shaped", Qwen3PresetOptions{"fp8", 0, 200});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->moe_inter, 1408);  // twice the weights per byte: 1352 -> 1408
  EXPECT_FALSE(find_qwen3_preset("qwen3-235b-shaped").ok());
  // The tensor list (not written here: the spine alone is 9 GB in FP8, 16 in BF16).
  const auto groups = qwen3_tensor_groups(*f);
  EXPECT_EQ(groups.size(), 1 + 94 * (8 + 1 + 128 * 3) + 2u);
  size_t fp8 = 0;
  for (const auto& g : groups) {
    if (g.size() != 2) continue;
    ++fp8;
    if (g[0].name == "model.layers.93.mlp.experts.127.down_proj.weight") {
      EXPECT_EQ(g[0].dtype, DType::F8_E4M3);
      EXPECT_EQ(g[0].shape, (std::vector<int64_t>{4096, 1408}));
      EXPECT_EQ(g[1].shape, (std::vector<int64_t>{32, 11}));
    }
  }
  EXPECT_EQ(fp8, 94 * (4 + 128 * 3u));
}

TEST(Qwen3Presets, ReleasedConfigsAsSparseCheckpoints) {
  struct Want {
    const char* name;
    int hidden, layers, heads, kv, moe_inter, experts, shards;
  };
  for (const Want& w : {Want{"qwen3-30b-a3b-sparse", 2048, 48, 32, 4, 768, 128, 16},
                        Want{"qwen3-235b-a22b-sparse", 4096, 94, 64, 4, 1536, 128, 118},
                        Want{"qwen3-coder-480b-a35b-sparse", 6144, 62, 96, 8, 2560, 160, 241}}) {
    ScratchDir dir("qwen3-sparse");
    auto ck = write_and_open(preset(w.name), dir, 1);
    ASSERT_TRUE(ck) << w.name;
    const auto& c = ck->config();
    EXPECT_EQ(c["hidden_size"], w.hidden);
    EXPECT_EQ(c["num_hidden_layers"], w.layers);
    EXPECT_EQ(c["num_attention_heads"], w.heads);
    EXPECT_EQ(c["num_key_value_heads"], w.kv);
    EXPECT_EQ(c["vocab_size"], 151936);
    EXPECT_EQ(ck->shards().size(), size_t(w.shards));
    const std::string last = "model.layers." + std::to_string(w.layers - 1) + ".mlp.experts." +
                             std::to_string(w.experts - 1) + ".down_proj.weight";
    EXPECT_TRUE(ck->require(last, DType::BF16, {w.hidden, w.moe_inter}).ok()) << last;
    EXPECT_TRUE(ck->require("lm_head.weight", DType::BF16, {151936, w.hidden}).ok());
  }
}

}  // namespace
}  // namespace deltafin
