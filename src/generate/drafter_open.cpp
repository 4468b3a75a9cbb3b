#include "generate/drafter_open.h"

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "generate/dspark_drafter.h"
#include "generate/model_drafter.h"
#include "generate/ngram_drafter.h"
#include "model/dspark_config.h"

namespace deltafin {

namespace {

namespace fs = std::filesystem;

std::string without_trailing_slash(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Result<DrafterChoice> open_dir(const std::string& dir, const Model& target, int threads) {
  DF_ASSIGN(auto ck, Checkpoint::open(dir));  // reads and checks config.json and the shards' headers
  DrafterChoice c;
  std::vector<std::unique_ptr<Drafter>> chain;
  if (is_dspark_config(ck->config())) {
    ck.reset();
    DF_ASSIGN(auto d, Dspark::open(dir, target, threads));
    chain.push_back(std::make_unique<DsparkDrafter>(std::move(d)));
    c.description = "dspark " + dir + ", then ngram";
  } else {
    ck.reset();
    DF_ASSIGN(auto m, ModelDrafter::open(dir, target.config(), threads));
    chain.push_back(std::move(m));
    c.description = "model drafter " + dir + ", then ngram";
  }
  chain.push_back(std::make_unique<NgramDrafter>());
  c.drafter = std::make_unique<DrafterChain>(std::move(chain));
  return c;
}

}  // namespace

std::vector<std::string> drafter_candidates(const std::string& model_dir, const std::string& store_dir,
                                            const std::string& store_source_dir) {
  std::vector<std::string> out;
  if (!store_dir.empty()) out.push_back((fs::path(store_dir) / "draft").string());
  if (!store_source_dir.empty()) out.push_back(without_trailing_slash(store_source_dir) + "-draft");
  if (!model_dir.empty()) out.push_back(without_trailing_slash(model_dir) + "-draft");
  return out;
}

Result<DrafterChoice> open_drafter(const std::string& spec, const Model& target,
                                   const std::vector<std::string>& candidates, int threads) {
  DrafterChoice c;
  if (spec == "off") {
    c.description = "off";
    return c;
  }
  if (spec == "ngram") {
    c.drafter = std::make_unique<NgramDrafter>();
    c.description = "ngram";
    return c;
  }
  if (spec != "auto") return open_dir(spec, target, threads);
  for (const auto& dir : candidates) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(dir) / "config.json", ec)) continue;
    auto r = open_dir(dir, target, threads);
    if (r.ok()) return std::move(r.value());
    c.warnings.push_back(fmt::format("draft: {} not used: {}", dir, r.message()));
  }
  c.drafter = std::make_unique<NgramDrafter>();
  c.description = "ngram (no drafter installed beside the model)";
  return c;
}

}  // namespace deltafin
