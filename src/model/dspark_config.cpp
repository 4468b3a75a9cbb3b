#include "model/dspark_config.h"

#include <cmath>
#include <set>
#include <string>

namespace deltafin {

namespace {

// Reads fields of one JSON object; keeps the first error.
struct Fields {
  const nlohmann::json& obj;
  const nlohmann::json* alt = nullptr;  // a nested object that may hold the key instead (dflash_config)
  std::string where;
  Status status;

  const nlohmann::json* find(const char* key, bool required = true) {
    if (!status.ok()) return nullptr;
    if (auto it = obj.find(key); it != obj.end()) return &*it;
    if (alt)
      if (auto it = alt->find(key); it != alt->end()) return &*it;
    if (required) status = error("{}: {} is missing", where, key);
    return nullptr;
  }
  int positive(const char* key) {
    const auto* v = find(key);
    if (!v) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (1 << 30)) {
      status = error("{}: {} must be a positive integer", where, key);
      return 0;
    }
    return int(v->get<int64_t>());
  }
  double number(const char* key, double fallback, bool required) {
    const auto* v = find(key, required);
    if (!v) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>())) {
      status = error("{}: {} must be a number", where, key);
      return fallback;
    }
    return v->get<double>();
  }
  bool flag(const char* key, bool fallback) {
    const auto* v = find(key, false);
    if (!v) return fallback;
    if (!v->is_boolean()) {
      status = error("{}: {} must be true or false", where, key);
      return fallback;
    }
    return v->get<bool>();
  }
  std::string text(const char* key, const char* fallback) {
    const auto* v = find(key, false);
    if (!v) return fallback;
    if (!v->is_string()) {
      status = error("{}: {} must be a string", where, key);
      return fallback;
    }
    return v->get<std::string>();
  }
};

}  // namespace

bool is_dspark_config(const nlohmann::json& j) {
  auto it = j.find("model_type");
  return j.is_object() && it != j.end() && it->is_string() && it->get<std::string>() == "k3_dspark";
}

Result<DsparkConfig> DsparkConfig::from_json(const nlohmann::json& j) {
  if (!is_dspark_config(j)) return error("DSpark config.json: model_type must be \"k3_dspark\"");
  const nlohmann::json* dflash = nullptr;
  if (auto it = j.find("dflash_config"); it != j.end() && it->is_object()) dflash = &*it;
  Fields f{j, dflash, "DSpark config.json", {}};
  DsparkConfig c;
  c.hidden = f.positive("hidden_size");
  c.num_layers = f.positive("num_hidden_layers");
  c.heads = f.positive("num_attention_heads");
  c.q_lora_rank = f.positive("q_lora_rank");
  c.kv_lora_rank = f.positive("kv_lora_rank");
  c.qk_nope_dim = f.positive("qk_nope_head_dim");
  c.qk_rope_dim = f.positive("qk_rope_head_dim");
  c.v_head_dim = f.positive("v_head_dim");
  c.intermediate = f.positive("intermediate_size");
  c.vocab = f.positive("vocab_size");
  c.rms_eps = float(f.number("rms_norm_eps", 1e-5, true));
  c.rope_theta = f.number("rope_theta", 0, true);
  c.mask_token_id = f.positive("mask_token_id");
  c.markov_rank = f.positive("markov_rank");
  if (f.find("block_size", false)) c.block_size = f.positive("block_size");
  c.confidence_head = f.flag("enable_confidence_head", true);
  c.confidence_with_markov = f.flag("confidence_head_with_markov", true);
  if (f.flag("mla_use_nope", false)) f.status = error("DSpark config.json: mla_use_nope must be false (YaRN rotary)");
  if (f.flag("mla_use_output_gate", false)) f.status = error("DSpark config.json: mla_use_output_gate must be false");
  if (f.flag("tie_word_embeddings", false)) f.status = error("DSpark config.json: tie_word_embeddings must be false");
  const std::string act = f.text("hidden_act", "silu");
  if (f.status.ok() && act != "silu") f.status = error("DSpark config.json: hidden_act \"{}\" (only silu)", act);
  const std::string markov = f.text("markov_head_type", "vanilla");
  if (f.status.ok() && markov != "vanilla" && markov != "classical")
    f.status = error("DSpark config.json: markov_head_type \"{}\" (vanilla or classical)", markov);
  if (const auto* t = f.find("target_layer_ids")) {
    if (!t->is_array() || t->empty()) f.status = error("DSpark config.json: target_layer_ids must be a non-empty list");
    for (const auto& x : *t) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > (1 << 20)) {
        f.status = error("DSpark config.json: target_layer_ids must hold non-negative integers");
        break;
      }
      c.target_layers.push_back(x.get<int>());
    }
    if (std::set<int>(c.target_layers.begin(), c.target_layers.end()).size() != c.target_layers.size())
      f.status = error("DSpark config.json: target_layer_ids lists a layer twice");
  }
  const auto* rs = f.find("rope_scaling");
  if (rs) {
    if (!rs->is_object()) return error("DSpark config.json: rope_scaling must be an object");
    Fields r{*rs, nullptr, "DSpark config.json: rope_scaling", {}};
    std::string type = r.text("type", "");
    if (type.empty()) type = r.text("rope_type", "");
    if (r.status.ok() && type != "yarn") r.status = error("DSpark config.json: rope_scaling type \"{}\" (only yarn)", type);
    c.yarn_factor = r.number("factor", 1, true);
    c.original_max_positions = int64_t(r.number("original_max_position_embeddings", 0, true));
    c.beta_fast = r.number("beta_fast", 32, false);
    c.beta_slow = r.number("beta_slow", 1, false);
    c.mscale = r.number("mscale", 1, false);
    c.mscale_all_dim = r.number("mscale_all_dim", 0, false);
    if (r.status.ok() && (c.yarn_factor < 1 || c.original_max_positions <= 0 || c.beta_fast <= c.beta_slow ||
                          c.beta_slow <= 0))
      r.status = error("DSpark config.json: rope_scaling needs factor >= 1, original_max_position_embeddings > 0 and "
                       "beta_fast > beta_slow > 0");
    DF_TRY(r.status);
  }
  DF_TRY(f.status);
  if (c.rope_theta <= 1) return error("DSpark config.json: rope_theta must be above 1");
  if (c.qk_rope_dim % 2) return error("DSpark config.json: qk_rope_head_dim must be even (rotated in pairs)");
  if (c.block_size < 2 || c.block_size > 16) return error("DSpark config.json: block_size {} (2..16)", c.block_size);
  if (c.mask_token_id >= c.vocab) return error("DSpark config.json: mask_token_id {} is outside the vocabulary", c.mask_token_id);
  return c;
}

Status DsparkConfig::check_target(const ModelConfig& t) const {
  if (hidden != t.hidden) return error("DSpark: hidden_size {} but the target's is {}", hidden, t.hidden);
  if (vocab != t.vocab) return error("DSpark: vocab_size {} but the target's is {}", vocab, t.vocab);
  for (int l : target_layers)
    if (l >= t.num_layers) return error("DSpark: target layer {} but the target has {} layers", l, t.num_layers);
  return {};
}

}  // namespace deltafin
