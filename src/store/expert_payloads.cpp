#include "store/expert_payloads.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/expert_generator.h"
#include "core/dtype.h"
#include "model/expert_layout.h"
#include "model/expert_source.h"
#include "model/families/families.h"
#include "model/weights.h"

namespace deltafin {

namespace {

class CheckpointPayloads : public ExpertPayloads {
 public:
  struct Expert {
    const TensorInfo* t[6] = {};  // w1, w1 scales, w2, w2 scales, w3, w3 scales (null: none)
  };
  CheckpointPayloads(std::vector<std::vector<Expert>> experts, ModelConfig cfg, std::vector<int> layers)
      : experts_(std::move(experts)), cfg_(std::move(cfg)), layout_(expert_layout(cfg_)), layers_(std::move(layers)) {}
  uint64_t expert_bytes() const override { return layout_.total; }
  std::string describe() const override { return "checkpoint"; }
  std::vector<std::string> files(int m, int e) const override {
    std::vector<std::string> out;
    for (const TensorInfo* t : experts_[m][e].t)
      if (t && std::find(out.begin(), out.end(), *t->file) == out.end()) out.push_back(*t->file);
    return out;
  }

  Status fill(int m, int e, std::span<uint8_t> out) const override {
    for (int k = 0; k < 6; ++k)
      if (const TensorInfo* t = experts_[m][e].t[k]) std::memcpy(out.data() + layout_.offset[k], t->data, t->nbytes);
    Status s = check_expert_payload(cfg_, layout_, out.data(), layers_[size_t(m)], e);
    if (!s.ok()) return error("{}: {}", *experts_[m][e].t[0]->file, s.message());
    return {};
  }

 private:
  std::vector<std::vector<Expert>> experts_;  // [moe_index][expert]
  ModelConfig cfg_;
  ExpertLayout layout_;
  std::vector<int> layers_;
};

class GeneratedPayloads : public ExpertPayloads {
 public:
  GeneratedPayloads(ExpertGenerator g, std::vector<int> moe_layers) : g_(std::move(g)), layers_(std::move(moe_layers)) {}
  uint64_t expert_bytes() const override { return g_.expert_bytes(); }
  std::string describe() const override { return fmt::format("generated (preset {}, seed {})", g_.preset.name, g_.seed); }
  std::vector<std::string> files(int, int) const override { return {}; }
  Status fill(int m, int e, std::span<uint8_t> out) const override {
    g_.fill(layers_[m], e, out);
    return {};
  }

 private:
  ExpertGenerator g_;
  std::vector<int> layers_;
};

Result<std::unique_ptr<ExpertPayloads>> from_checkpoint(const Checkpoint& ck, const ModelConfig& cfg,
                                                        const std::vector<int>& moe_layers) {
  // Names, dtypes and shapes of every expert tensor are checked here.
  DF_TRY(CheckpointExpertSource::create(ck, cfg).status());
  const FamilyEntry& family = family_of(cfg);
  const ExpertLayout layout = expert_layout(cfg);
  const int E = cfg.moe.num_experts, M = int(moe_layers.size());
  std::vector<std::vector<CheckpointPayloads::Expert>> experts(M, std::vector<CheckpointPayloads::Expert>(E));
  for (int m = 0; m < M; ++m)
    for (int e = 0; e < E; ++e) {
      const ExpertTensorNames names = family.expert_names(cfg, moe_layers[m], e);
      for (int k = 0; k < 6; ++k) {
        if (!layout.bytes[k]) continue;
        const int part = record_name_part(k);
        const std::string& name = k % 2 ? names.scale[part] : names.weight[part];
        const TensorInfo* t = ck.find(name);
        if (!t || t->nbytes != layout.bytes[k])
          return error("{}: expert tensor '{}' of layer {} expert {} is missing or not {} bytes", ck.dir(), name,
                       moe_layers[m], e, layout.bytes[k]);
        experts[m][e].t[k] = t;
      }
    }
  return std::unique_ptr<ExpertPayloads>(new CheckpointPayloads(std::move(experts), cfg, moe_layers));
}

Result<std::unique_ptr<ExpertPayloads>> from_generator(const Checkpoint& ck, const std::vector<int>& moe_layers) {
  DF_ASSIGN(ExpertGenerator g, load_expert_generator(ck.dir()));
  const std::string record = (std::filesystem::path(ck.dir()) / kExpertGeneratorFile).string();
  // The generator's shapes must be the ones the config describes.
  if (nlohmann::json::parse(preset_config_json(g.preset).dump()) != ck.config())
    return error("{}: config.json is not preset {}'s (experts_gb {}); the generator record belongs to another model",
                 record, g.preset.name, g.preset.experts_gb);
  if (!moe_layers.empty() && ck.find(expert_tensor_name(moe_layers[0], 0, "w1", "weight_packed")))
    return error("{}: the checkpoint holds routed expert tensors and a generator record; remove one", record);
  return std::unique_ptr<ExpertPayloads>(new GeneratedPayloads(std::move(g), moe_layers));
}

}  // namespace

Result<std::unique_ptr<ExpertPayloads>> open_expert_payloads(const Checkpoint& ck, const ModelConfig& cfg,
                                                             const std::vector<int>& moe_layers) {
  if (has_expert_generator(ck.dir())) return from_generator(ck, moe_layers);
  return from_checkpoint(ck, cfg, moe_layers);
}

}  // namespace deltafin
