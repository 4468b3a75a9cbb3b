// Routed experts regenerated on demand: make-model's seeded random weights for
// one expert, the same bytes its complete checkpoint would hold. A spine-only
// checkpoint carries a small record of the generator (preset, its expert
// budget, seed) instead of the experts, and `prepare` writes the experts
// straight into the store's packs, so the disk holds them once.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "checkpoint/presets.h"
#include "core/result.h"

namespace deltafin {

constexpr const char* kExpertGeneratorFile = "deltafin-expert-generator.json";

struct ExpertGenerator {
  ModelPreset preset;
  uint64_t seed = 1;

  uint64_t expert_bytes() const { return preset_expert_bytes(preset); }
  // The six records of expert `expert` of model layer `layer`, back to back
  // (w1 packed, w1 scale, w2 packed, w2 scale, w3 packed, w3 scale);
  // out.size() == expert_bytes().
  void fill(int layer, int expert, std::span<uint8_t> out) const;

  std::string record_json() const;
  // Parses a record; errors name `where` and the field.
  static Result<ExpertGenerator> parse(const std::string& text, const std::string& where);
};

// dir/kExpertGeneratorFile exists.
bool has_expert_generator(const std::string& dir);
Result<ExpertGenerator> load_expert_generator(const std::string& dir);

}  // namespace deltafin
