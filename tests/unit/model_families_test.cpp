// config.json -> ModelConfig per family (src/model/families/): the Hub's
// published Qwen3 configs map onto the engine's blocks, and every bad input
// is a clear error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace deltafin {
namespace {

// Qwen3-30B-A3B's config.json as published on the Hub.
nlohmann::json qwen3_30b_a3b() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

// Qwen3-0.6B (dense, tied embeddings).
nlohmann::json qwen3_0_6b() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
    "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
}

std::string error_of(const nlohmann::json& j) {
  auto c = ModelConfig::from_json(j);
  return c.ok() ? std::string("(accepted)") : c.message();
}

TEST(ModelFamilies, Qwen3MoeMapsOntoGqaSoftmaxRoutingAndBf16Experts) {
  auto c = ModelConfig::from_json(qwen3_30b_a3b());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->family, Family::Qwen3Moe);
  EXPECT_EQ(c->residual, ResidualKind::Plain);
  EXPECT_EQ(c->activation, Activation::SiluGlu);
  EXPECT_EQ(c->num_gqa_layers(), 48);
  EXPECT_EQ(c->num_moe_layers(), 48);
  EXPECT_EQ(c->gqa.heads, 32);
  EXPECT_EQ(c->gqa.kv_heads, 4);
  EXPECT_EQ(c->gqa.head_dim, 128);
  EXPECT_TRUE(c->gqa.qk_norm);
  EXPECT_EQ(c->gqa.rope_theta, 1e6);
  EXPECT_EQ(c->moe.router.kind, RouterKind::Softmax);
  EXPECT_TRUE(c->moe.router.renormalize);
  EXPECT_EQ(c->moe.format, ExpertFormat::Bf16);
  EXPECT_EQ(c->moe.latent, 0);
  EXPECT_EQ(c->moe.num_shared, 0);
  EXPECT_EQ(c->expert_in(), 2048);
  EXPECT_EQ(c->expert_bytes(), 3ull * 768 * 2048 * 2);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_EQ(c->eos_id, 151645);
}

TEST(ModelFamilies, MlpOnlyLayersAndSparseStepKeepTheDenseMlp) {
  auto j = qwen3_30b_a3b();
  j["num_hidden_layers"] = 6;
  j["mlp_only_layers"] = {0};
  j["decoder_sparse_step"] = 2;
  auto c = ModelConfig::from_json(j);
  ASSERT_TRUE(c.ok()) << c.message();
  // MoE where (l + 1) % 2 == 0 and l is not listed: layers 1, 3, 5.
  const std::vector<FfnKind> want = {FfnKind::Dense, FfnKind::MoE, FfnKind::Dense,
                                     FfnKind::MoE,   FfnKind::Dense, FfnKind::MoE};
  EXPECT_EQ(c->ffn, want);
}

TEST(ModelFamilies, Qwen3DenseWithTiedEmbeddings) {
  auto c = ModelConfig::from_json(qwen3_0_6b());
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->family, Family::Qwen3);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->num_moe_layers(), 0);
  EXPECT_EQ(c->dense_inter, 3072);
  EXPECT_EQ(c->gqa.kv_dim(), 8 * 128);
}

TEST(ModelFamilies, Fp8QuantizationConfigSelectsFp8Blocks) {
  auto j = qwen3_30b_a3b();
  j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                              {"weight_block_size", {128, 128}}};
  auto c = ModelConfig::from_json(j);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->moe.format, ExpertFormat::Fp8Block);
  EXPECT_TRUE(c->fp8_spine);
  // 768 x 2048 codes per matrix plus 6 x 16 fp32 block scales.
  EXPECT_EQ(c->expert_bytes(), 3ull * 768 * 2048 + 3ull * 6 * 16 * 4);

  j["quantization_config"]["weight_block_size"] = {64, 64};
  EXPECT_NE(error_of(j).find("weight_block_size must be [128, 128]"), std::string::npos) << error_of(j);
  j["quantization_config"] = {{"quant_method", "gptq"}};
  EXPECT_NE(error_of(j).find("quant_method \"gptq\" is not supported"), std::string::npos) << error_of(j);
}

TEST(ModelFamilies, UnknownModelTypeListsTheSupportedOnes) {
  auto j = qwen3_30b_a3b();
  j["model_type"] = "llama";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("model_type \"llama\" is not supported"), std::string::npos) << e;
  for (const char* t : {"kimi_k3", "qwen3_moe", "qwen3"}) EXPECT_NE(e.find(t), std::string::npos) << e;
  j.erase("model_type");
  EXPECT_NE(error_of(j).find("model_type is missing"), std::string::npos);
}

TEST(ModelFamilies, MissingOrInconsistentKeysAreNamed) {
  struct Case {
    const char* key;
    nlohmann::json value;  // null: erase the key
    const char* message;
  };
  const Case cases[] = {
      {"hidden_size", nullptr, "hidden_size is missing"},
      {"num_experts", nullptr, "num_experts is missing"},
      {"num_key_value_heads", 5, "not a multiple of num_key_value_heads"},
      {"num_experts_per_tok", 129, "num_experts_per_tok 129 exceeds num_experts 128"},
      {"mlp_only_layers", {48}, "mlp_only_layers lists layer 48"},
      {"hidden_act", "gelu", "hidden_act must be \"silu\""},
      {"attention_bias", true, "attention_bias true is not supported"},
      {"use_sliding_window", true, "use_sliding_window true is not supported"},
      {"rope_scaling", {{"rope_type", "longrope"}, {"factor", 4.0}}, "rope_scaling type \"longrope\" is not supported"},
      {"rope_scaling", {{"rope_type", "yarn"}}, "rope_scaling.factor is missing"},
      {"eos_token_id", 200000, "bos/eos ids must be below vocab_size"},
      {"head_dim", 127, "head_dim 127 must be even"},
      {"rms_norm_eps", "tiny", "rms_norm_eps must be a number"},
      {"norm_topk_prob", "yes", "norm_topk_prob must be true or false"},
  };
  for (const Case& k : cases) {
    auto j = qwen3_30b_a3b();
    if (k.value.is_null())
      j.erase(k.key);
    else
      j[k.key] = k.value;
    const std::string e = error_of(j);
    EXPECT_NE(e.find(k.message), std::string::npos) << k.key << ": " << e;
  }
}

}  // namespace
}  // namespace deltafin
