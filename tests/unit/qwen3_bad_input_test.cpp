// A Qwen3 checkpoint that does not match its config, or whose FP8 scales are
// invalid, is refused by Model::open (or by the first use of the expert) with
// a message naming the tensor -- never a crash or silently wrong logits.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/qwen3_writer.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "model/model.h"

namespace deltafin {
namespace {

using testing::ScratchDir;

void write_model(const ScratchDir& dir, const char* format) {
  auto p = find_qwen3_preset("qwen3-moe-tiny", Qwen3PresetOptions{format, 0, 0});
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_TRUE(write_qwen3_checkpoint(*p, dir.str(), 3).ok());
}

void edit_config(const ScratchDir& dir, const char* key, const nlohmann::json& value) {
  const auto path = dir.path() / "config.json";
  auto cfg = nlohmann::ordered_json::parse(testing::read_file(path));
  cfg[key] = value;
  std::ofstream(path) << cfg.dump(2);
}

// Overwrites the first float of tensor `name` in place.
void poke_f32(const ScratchDir& dir, const std::string& name, float value) {
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.ok()) << ck.message();
  const TensorInfo* t = ck.value()->find(name);
  ASSERT_NE(t, nullptr) << name;
  const std::string file = *t->file;
  const uint64_t at = t->file_offset;
  ck.value().reset();
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(at));
  f.write(reinterpret_cast<const char*>(&value), 4);
}

std::string open_error(const ScratchDir& dir) {
  auto m = Model::open(dir.str(), 1);
  return m.ok() ? std::string("(opened)") : m.message();
}

TEST(Qwen3BadInput, ShapesThatDoNotMatchTheConfigNameTheTensor) {
  ScratchDir dir("qwen3-bad-shape");
  write_model(dir, "bf16");
  edit_config(dir, "moe_intermediate_size", 128);
  EXPECT_NE(open_error(dir).find("model.layers.0.mlp.experts.0.gate_proj.weight"), std::string::npos) << open_error(dir);
  edit_config(dir, "moe_intermediate_size", 192);
  edit_config(dir, "num_key_value_heads", 4);
  EXPECT_NE(open_error(dir).find("self_attn.k_proj.weight"), std::string::npos) << open_error(dir);
  edit_config(dir, "num_key_value_heads", 2);
  edit_config(dir, "tie_word_embeddings", true);
  EXPECT_NE(open_error(dir).find("has lm_head.weight"), std::string::npos) << open_error(dir);
}

TEST(Qwen3BadInput, ExpertsInAnotherFormatThanTheConfigSays) {
  ScratchDir dir("qwen3-bad-format");
  write_model(dir, "bf16");
  edit_config(dir, "quantization_config",
              {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}});
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("F8_E4M3"), std::string::npos) << e;
}

TEST(Qwen3BadInput, Fp8SpineScaleThatIsZeroOrNotFinite) {
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    ScratchDir dir("qwen3-bad-scale");
    write_model(dir, "fp8");
    poke_f32(dir, "model.layers.2.self_attn.o_proj.weight_scale_inv", bad);
    const std::string e = open_error(dir);
    EXPECT_NE(e.find("model.layers.2.self_attn.o_proj.weight_scale_inv"), std::string::npos) << e;
    EXPECT_NE(e.find("finite and positive"), std::string::npos) << e;
  }
}

TEST(Qwen3BadInput, Fp8ExpertScaleIsRefusedOnFirstUse) {
  ScratchDir dir("qwen3-bad-expert-scale");
  write_model(dir, "fp8");
  poke_f32(dir, "model.layers.0.mlp.experts.5.down_proj.weight_scale_inv", 0.0f);
  auto m = Model::open(dir.str(), 1);
  ASSERT_TRUE(m.ok()) << m.message();  // experts are checked when first used
  std::vector<ExpertWeights> views(1);
  const int e = 5;
  const Status s = m.value()->experts().begin(0, std::span<const int>(&e, 1), views);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("experts.5.down_proj.weight_scale_inv"), std::string::npos) << s.message();
  const int other = 4;
  EXPECT_TRUE(m.value()->experts().begin(0, std::span<const int>(&other, 1), views).ok());
}

}  // namespace
}  // namespace deltafin
