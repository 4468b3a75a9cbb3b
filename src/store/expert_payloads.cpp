#include "store/expert_payloads.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/expert_generator.h"
#include "core/dtype.h"
#include "model/expert_source.h"
#include "model/weights.h"

namespace deltafin {

namespace {

class CheckpointPayloads : public ExpertPayloads {
 public:
  struct Expert {
    const TensorInfo* t[6];
  };
  CheckpointPayloads(std::vector<std::vector<Expert>> experts, uint64_t bytes)
      : experts_(std::move(experts)), bytes_(bytes) {}
  uint64_t expert_bytes() const override { return bytes_; }
  std::string describe() const override { return "checkpoint"; }
  std::vector<std::string> files(int m, int e) const override {
    std::vector<std::string> out;
    for (const TensorInfo* t : experts_[m][e].t)
      if (std::find(out.begin(), out.end(), *t->file) == out.end()) out.push_back(*t->file);
    return out;
  }

  Status fill(int m, int e, std::span<uint8_t> out) const override {
    uint64_t at = 0;
    for (int k = 0; k < 6; ++k) {
      const TensorInfo* t = experts_[m][e].t[k];
      if (k % 2 == 1) {
        if (const void* bad = std::memchr(t->data, kE8M0Invalid, t->nbytes))
          return error("{}: tensor '{}': MXFP4 scale byte 255 (NaN encoding) at byte {}", *t->file, t->name,
                       static_cast<const uint8_t*>(bad) - t->data);
      }
      std::memcpy(out.data() + at, t->data, t->nbytes);
      at += t->nbytes;
    }
    return {};
  }

 private:
  std::vector<std::vector<Expert>> experts_;  // [moe_index][expert]
  uint64_t bytes_;
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
  DF_TRY(CheckpointExpertSource::create(ck, cfg).status());
  static const char* kParts[3] = {"w1", "w2", "w3"};
  const int E = cfg.moe.num_experts, M = int(moe_layers.size());
  std::vector<std::vector<CheckpointPayloads::Expert>> experts(M, std::vector<CheckpointPayloads::Expert>(E));
  uint64_t expert_bytes = 0;
  for (int m = 0; m < M; ++m)
    for (int e = 0; e < E; ++e) {
      uint64_t bytes = 0;
      for (int k = 0; k < 6; ++k) {
        const TensorInfo* t = ck.find(expert_tensor_name(moe_layers[m], e, kParts[k / 2], k % 2 ? "weight_scale" : "weight_packed"));
        if (!t) return error("{}: expert tensor missing for layer {} expert {}", ck.dir(), moe_layers[m], e);
        experts[m][e].t[k] = t;
        bytes += t->nbytes;
      }
      if (expert_bytes && bytes != expert_bytes)
        return error("layer {} expert {}: {} bytes, others {}", moe_layers[m], e, bytes, expert_bytes);
      expert_bytes = bytes;
    }
  return std::unique_ptr<ExpertPayloads>(new CheckpointPayloads(std::move(experts), expert_bytes));
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
