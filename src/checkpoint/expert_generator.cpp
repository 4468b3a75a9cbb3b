#include "checkpoint/expert_generator.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/make_model.h"
#include "core/files.h"

namespace deltafin {

namespace {
constexpr const char* kFormat = "deltafin-expert-generator";
constexpr int kVersion = 1;
}  // namespace

void ExpertGenerator::fill(int layer, int expert, std::span<uint8_t> out) const {
  size_t at = 0;
  for (const TensorSpec& t : expert_tensor_group(preset, layer, expert)) {
    const size_t n = t.nbytes();
    fill_random_tensor(preset, seed, t, out.subspan(at, n));
    at += n;
  }
}

std::string ExpertGenerator::record_json() const {
  nlohmann::ordered_json j = {{"format", kFormat},         {"version", kVersion},
                              {"preset", preset.name},     {"experts_gb", preset.experts_gb},
                              {"seed", seed},              {"expert_bytes", expert_bytes()},
                              {"num_experts", preset.experts}, {"moe_layers", preset_moe_layers(preset)}};
  // The spine's routing options (the experts do not depend on them), so that a
  // rerun of make-model --store with other ones rewrites the spine; absent
  // where 0, so records written before them read the same.
  if (preset.route_skew != 0) j["route_skew"] = preset.route_skew;
  if (preset.route_persist != 0) j["route_persist"] = preset.route_persist;
  return j.dump(2) + "\n";
}

Result<ExpertGenerator> ExpertGenerator::parse(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return error("{}: not JSON: {}", where, e.what());
  }
  if (!j.is_object() || j.value("format", "") != kFormat) return error("{}: format must be \"{}\"", where, kFormat);
  if (j.value("version", 0) != kVersion) return error("{}: version must be {}", where, kVersion);
  if (!j.contains("preset") || !j["preset"].is_string()) return error("{}: preset must be a string", where);
  if (!j.contains("seed") || !j["seed"].is_number_unsigned()) return error("{}: seed must be a non-negative integer", where);
  if (!j.contains("experts_gb") || !j["experts_gb"].is_number()) return error("{}: experts_gb must be a number", where);
  auto p = find_preset(j["preset"].get<std::string>(), j["experts_gb"].get<double>());
  if (!p.ok()) return error("{}: {}", where, p.message());
  if (p->sparse) return error("{}: preset {} has no weights to generate", where, p->name);
  ExpertGenerator g{*p, j["seed"].get<uint64_t>()};
  if (j.value("expert_bytes", uint64_t(0)) != g.expert_bytes())
    return error("{}: expert_bytes {} does not match preset {} ({} bytes)", where, j.value("expert_bytes", uint64_t(0)),
                 p->name, g.expert_bytes());
  return g;
}

bool has_expert_generator(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(dir) / kExpertGeneratorFile, ec);
}

Result<ExpertGenerator> load_expert_generator(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kExpertGeneratorFile).string();
  DF_ASSIGN(std::string text, read_file(path));
  return ExpertGenerator::parse(text, path);
}

}  // namespace deltafin
