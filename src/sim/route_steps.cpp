#include "sim/route_steps.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/json_lines.h"

namespace deltafin::sim {

Result<RouteTrace> read_route_steps(const std::string& path, const std::vector<int>& moe_layers, int max_moe_layers,
                                    int experts, int prompt_tokens, int verify_block) {
  if (prompt_tokens < 0) return error("--prompt-tokens must be >= 0");
  if (verify_block < 1) return error("--verify-block must be >= 1");
  // pos -> layer -> experts
  std::map<int, std::map<int, std::set<int>>> routes;
  std::set<int> layers_seen;
  DF_TRY(for_each_json_line(path, R"({"pos":P,"layer":L,"experts":[...]})", [&](const nlohmann::json& j, int lineno) -> Status {
    if (j.is_object() && j.contains("guess") && !j.contains("experts")) return {};  // a prefetch guess line
    if (!j.is_object() || !j.contains("pos") || !j["pos"].is_number_integer() || !j.contains("layer") ||
        !j["layer"].is_number_integer() || !j.contains("experts") || !j["experts"].is_array())
      return error("{}:{}: expected {{\"pos\":P,\"layer\":L,\"experts\":[...]}}", path, lineno);
    const long long pos = j["pos"].get<long long>(), layer = j["layer"].get<long long>();
    if (pos < 0 || pos > 1'000'000'000) return error("{}:{}: position {} is out of range", path, lineno, pos);
    if (layer < 0 || layer > 1'000'000) return error("{}:{}: layer {} is out of range", path, lineno, layer);
    if (!moe_layers.empty() && !std::binary_search(moe_layers.begin(), moe_layers.end(), int(layer)))
      return error("{}:{}: layer {} is not an MoE layer of the store", path, lineno, layer);
    auto& set = routes[int(pos)][int(layer)];
    for (const auto& x : j["experts"]) {
      if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() >= experts)
        return error("{}:{}: an expert id is out of range (0..{})", path, lineno, experts - 1);
      set.insert(x.get<int>());
    }
    layers_seen.insert(int(layer));
    return {};
  }));
  if (routes.empty()) return error("{}: the route trace has no routes", path);
  RouteTrace t;
  t.layers = moe_layers.empty() ? std::vector<int>(layers_seen.begin(), layers_seen.end()) : moe_layers;
  if (moe_layers.empty() && int(t.layers.size()) > max_moe_layers)
    return error("{}: the trace names {} MoE layers, more than --moe-layers {}", path, t.layers.size(), max_moe_layers);
  t.positions = int(routes.size());
  auto moe_index = [&](int layer) {
    return int(std::lower_bound(t.layers.begin(), t.layers.end(), layer) - t.layers.begin());
  };
  const size_t M = moe_layers.empty() ? size_t(max_moe_layers) : moe_layers.size();
  // The step being gathered: the prefill block, or a decode step of up to
  // `verify_block` positions; per layer, the union of its positions' experts.
  std::vector<std::set<int>> block(M);
  bool in_block = false, block_prefill = false;
  int block_first = 0, block_tokens = 0;
  auto flush_block = [&] {
    if (!in_block) return;
    RouteStep s{block_first, block_tokens, block_prefill, {}};
    for (auto& b : block) s.experts.emplace_back(b.begin(), b.end()), b.clear();
    t.steps.push_back(std::move(s));
    in_block = false;
  };
  for (const auto& [pos, by_layer] : routes) {
    const bool prefill = pos < prompt_tokens;
    if (in_block && (prefill != block_prefill || (!prefill && block_tokens == verify_block))) flush_block();
    if (!in_block) block_first = pos, block_tokens = 0, block_prefill = prefill, in_block = true;
    block_tokens++;
    for (const auto& [layer, ex] : by_layer) block[moe_index(layer)].insert(ex.begin(), ex.end());
  }
  flush_block();
  return t;
}

}  // namespace deltafin::sim
