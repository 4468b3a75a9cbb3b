// run --store refuses a store whose manifest names another model type or
// expert format than its spine's config.json (store/manifest_check.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "store/manifest.h"
#include "store/manifest_check.h"

namespace deltafin {
namespace {

ModelConfig qwen3_moe_fp8() {
  auto j = nlohmann::json::parse(R"({
    "model_type": "qwen3_moe", "hidden_act": "silu", "hidden_size": 256, "num_hidden_layers": 2,
    "vocab_size": 512, "intermediate_size": 512, "rms_norm_eps": 1e-6, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "rope_theta": 1000000.0, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 192, "norm_topk_prob": true,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}})");
  auto c = ModelConfig::from_json(j);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? *c : ModelConfig{};
}

Manifest matching(const ModelConfig& c) {
  Manifest m;
  m.model_type = "qwen3_moe";
  m.expert_format = "fp8_block";
  m.num_layers = c.num_layers;
  m.num_experts = c.moe.num_experts;
  m.moe_layers = {0, 1};
  m.expert_bytes = c.expert_bytes();
  return m;
}

TEST(StoreManifestModel, ModelTypeAndExpertFormatMustMatchTheSpine) {
  const ModelConfig c = qwen3_moe_fp8();
  EXPECT_TRUE(check_manifest_model(matching(c), c, "config.json").ok());

  Manifest m = matching(c);
  m.model_type = "kimi_k3";  // a store from before version 3 reads as K3
  Status s = check_manifest_model(m, c, "config.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model_type 'kimi_k3' != 'qwen3_moe'"), std::string::npos) << s.message();

  m = matching(c);
  m.expert_format = "bf16";
  s = check_manifest_model(m, c, "config.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expert_format 'bf16' != 'fp8_block'"), std::string::npos) << s.message();

  m = matching(c);
  m.expert_bytes += 4;
  s = check_manifest_model(m, c, "config.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("3 x fp8_block 192 x 256"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace deltafin
