// `deltafin inspect --model DIR [--json] [--verify-experts]`: opens and
// validates a checkpoint (headers, config, spine binding, expert records) and
// prints its memory plan. Touches only headers and small vectors unless
// --verify-experts asks for every expert's scale bytes to be scanned.
#include <cstdio>
#include <filesystem>
#include <string>

#include "checkpoint/safetensors.h"
#include "cli/command.h"
#include "model/config.h"
#include "model/expert_source.h"
#include "model/memory_plan.h"
#include "model/weights.h"

namespace deltafin::cli {

namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
  bool verify_experts = false;
};

// Errors are one line whatever the input was (parser messages may quote it).
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// "1,446,..." for reading large byte counts.
std::string grouped(uint64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string human(uint64_t v) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double x = double(v);
  int u = 0;
  while (x >= 1000 && u < 4) x /= 1000, ++u;
  return fmt::format("{:.{}f} {}", x, u ? 3 : 0, units[u]);
}

// Every expert's format checks (MXFP4 scales, FP8 codes and scales), as the
// first use of each would run them.
Status verify_all_experts(const Checkpoint& ck, const ModelConfig& cfg) {
  DF_ASSIGN(auto src, CheckpointExpertSource::create(ck, cfg));
  std::vector<ExpertWeights> views(1);
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.ffn[l] != FfnKind::MoE) continue;
    for (int e = 0; e < cfg.moe.num_experts; ++e) DF_TRY(src->begin(l, std::span<const int>(&e, 1), views));
  }
  return {};
}

Result<MemoryPlan> inspect(const InspectArgs& a) {
  DF_ASSIGN(auto ck, Checkpoint::open(a.model));
  auto cfg = ModelConfig::from_json(ck->config());
  if (!cfg.ok()) {
    // config.cpp names the file relatively; name it in full.
    std::string m = cfg.message();
    const std::string rel = "config.json:";
    if (m.rfind(rel, 0) == 0) m = (std::filesystem::path(a.model) / "config.json").string() + ":" + m.substr(rel.size());
    return Status::error(m);
  }
  DF_ASSIGN(auto weights, ModelWeights::bind(*ck, *cfg));
  (void)weights;
  DF_ASSIGN(auto experts, CheckpointExpertSource::create(*ck, *cfg));
  (void)experts;
  if (a.verify_experts) DF_TRY(verify_all_experts(*ck, *cfg));
  return plan_memory(*ck, *cfg);
}

int run_inspect(const InspectArgs& a) {
  auto plan = inspect(a);
  if (!plan.ok()) return fail(one_line(plan.message()));
  const MemoryPlan& p = *plan;
  if (a.json) {
    auto j = p.to_json();
    j["model"] = a.model;
    j["experts_verified"] = a.verify_experts;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("checkpoint %s: valid%s\n", a.model.c_str(), a.verify_experts ? " (all expert scales verified)" : "");
  std::printf("  shards                       %s\n", grouped(p.shards).c_str());
  std::printf("  tensors                      %s\n", grouped(p.tensors).c_str());
  std::printf("  largest file offset          %s B (%s)\n", grouped(p.largest_file_offset).c_str(),
              human(p.largest_file_offset).c_str());
  std::printf("  experts                      %d MoE layers x %d = %s\n", p.moe_layers, p.experts_per_layer,
              grouped(p.experts_total).c_str());
  std::printf("memory plan\n");
  std::printf("  resident spine               %s B (%s)\n", grouped(p.spine_bytes).c_str(), human(p.spine_bytes).c_str());
  std::printf("  one routed expert            %s B\n", grouped(p.expert_bytes).c_str());
  std::printf("  expert bytes per cold token  %s B (%s) = top-%d x %d layers x %s\n",
              grouped(p.expert_bytes_per_cold_token).c_str(), human(p.expert_bytes_per_cold_token).c_str(), p.top_k,
              p.moe_layers, grouped(p.expert_bytes).c_str());
  std::printf("  routed experts total         %s B (%s)\n", grouped(p.routed_expert_bytes).c_str(),
              human(p.routed_expert_bytes).c_str());
  std::printf("  KDA state per sequence       %s B (%s) = %d layers x %s\n", grouped(p.kda_state_bytes).c_str(),
              human(p.kda_state_bytes).c_str(), p.kda_layers, grouped(p.kda_state_bytes_per_layer).c_str());
  std::printf("  MLA latent cache per token   %s B (%s) = %d layers x (kv_lora + rope) x 4\n",
              grouped(p.mla_cache_bytes_per_token).c_str(), human(p.mla_cache_bytes_per_token).c_str(), p.mla_layers);
  if (p.gqa_layers)
    std::printf("  KV cache per token           %s B (%s) = %d layers x 2 x kv_heads x head_dim x 4\n",
                grouped(p.kv_cache_bytes_per_token).c_str(), human(p.kv_cache_bytes_per_token).c_str(), p.gqa_layers);
  return 0;
}

void setup(CLI::App& root) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = root.add_subcommand("inspect", "Validate a checkpoint and print its memory plan");
  set_example(cmd, "deltafin inspect --model models/demo");
  cmd->add_option("--model", args->model, "checkpoint directory")->required();
  cmd->add_flag("--json", args->json, "print the plan as JSON");
  cmd->add_flag("--verify-experts", args->verify_experts, "check every expert in its format: MXFP4 scale bytes, FP8 codes and block scales (reads them all)");
  cmd->callback([args] { set_exit_code(run_inspect(*args)); });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
