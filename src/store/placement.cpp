#include "store/placement.h"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "store/heat_file.h"

namespace deltafin {

Result<PlacementPlan> plan_placement(int moe_layers, int experts, uint64_t span_bytes, const std::vector<double>& rates,
                                     const std::vector<std::pair<int, int>>& hot, uint64_t replicas) {
  const int D = int(rates.size());
  if (D == 0) return error("placement: no drives");
  if (replicas > 0 && D < 2) return error("replicas need at least two --drive directories");
  double sum = 0;
  for (double r : rates) {
    if (!(r > 0)) return error("placement: drive rates must be positive");
    sum += r;
  }
  PlacementPlan p;
  p.files.assign(D, std::vector<std::vector<int>>(moe_layers));
  p.copies.assign(size_t(moe_layers) * experts, {});
  std::vector<double> credit(D, 0);
  for (int m = 0; m < moe_layers; ++m)
    for (int e = 0; e < experts; ++e) {
      for (int d = 0; d < D; ++d) credit[d] += rates[d];
      int best = int(std::max_element(credit.begin(), credit.end()) - credit.begin());
      credit[best] -= sum;
      p.copies[size_t(m) * experts + e].push_back(best);
    }
  // A layer waits for its busiest drive, so replicas balance each layer, not
  // the store: a replica goes to the drive (other than the primary) whose
  // bytes of this layer would take the least time; ties to the drive that
  // shares the fewest of this layer's copies with the primary (so that load can
  // move between every pair of drives), then to the lower drive.
  std::vector<double> layer_bytes(size_t(moe_layers) * D, 0);
  std::vector<int> pairs(size_t(moe_layers) * D * D, 0);  // [m][lo][hi]: copies of layer m on drives lo and hi
  for (int m = 0; m < moe_layers; ++m)
    for (int e = 0; e < experts; ++e) layer_bytes[size_t(m) * D + p.copies[size_t(m) * experts + e][0]] += double(span_bytes);
  uint64_t made = 0;
  for (const auto& [m, e] : hot) {
    if (made >= replicas) break;
    auto& c = p.copies[size_t(m) * experts + e];
    if (c.size() > 1) continue;
    const int primary = c[0];
    auto pair_count = [&](int d) -> int& {
      return pairs[(size_t(m) * D + std::min(primary, d)) * D + std::max(primary, d)];
    };
    int best = -1;
    double best_eta = 0;
    for (int d = 0; d < D; ++d) {
      if (d == primary) continue;
      const double eta = (layer_bytes[size_t(m) * D + d] + double(span_bytes)) / rates[d];
      if (best < 0 || eta < best_eta || (eta == best_eta && pair_count(d) < pair_count(best))) best = d, best_eta = eta;
    }
    c.push_back(best);
    layer_bytes[size_t(m) * D + best] += double(span_bytes);
    pair_count(best)++;
    made++;
  }
  for (int m = 0; m < moe_layers; ++m)
    for (int e = 0; e < experts; ++e)
      for (int d : p.copies[size_t(m) * experts + e]) p.files[d][m].push_back(e);
  return p;
}

Result<std::vector<std::pair<int, int>>> read_route_trace(const std::string& path, const std::vector<int>& moe_layers,
                                                          int experts) {
  std::ifstream in(path);
  if (!in) return error("{}: cannot open the route trace", path);
  std::map<std::pair<int, int>, uint64_t> counts;
  // A store's heat file (heat_file.h) ranks by its decayed counts (x1000, so fractions still order).
  // It is one JSON object that opens with its "format" key; a trace's lines never do, so a look at the
  // first bytes decides (a trace is not parsed twice).
  char head[16] = {};
  in.read(head, sizeof head - 1);
  const bool is_heat = std::string_view(head, size_t(in.gcount())).starts_with("{\"format\"");
  in.clear();
  in.seekg(0);
  if (is_heat) {
    DF_ASSIGN(auto heat, load_heat_file(path));
    if (heat.moe_layers != int(moe_layers.size()) || heat.experts != experts)
      return error("{}: heat file is for {} x {} experts, this model has {} x {}", path, heat.moe_layers,
                   heat.experts, moe_layers.size(), experts);
    for (int m = 0; m < heat.moe_layers; ++m)
      for (int e = 0; e < experts; ++e)
        counts[{m, e}] = uint64_t(std::llround(1000 * heat.counts[size_t(m) * size_t(experts) + size_t(e)]));
    in.setstate(std::ios::eofbit);
  }
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '{') {  // `run --route-trace` JSON line
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        return error("{}:{}: not valid JSON", path, lineno);
      }
      if (j.is_object() && j.contains("guess") && !j.contains("experts")) continue;  // a prefetch guess, not a route
      if (!j.is_object() || !j.contains("layer") || !j["layer"].is_number_integer() || !j.contains("experts") ||
          !j["experts"].is_array())
        return error("{}:{}: expected {{\"layer\": L, \"experts\": [...]}}", path, lineno);
      const int layer = j["layer"].get<int>();
      auto it = std::find(moe_layers.begin(), moe_layers.end(), layer);
      if (it == moe_layers.end()) return error("{}:{}: layer {} is not an MoE layer", path, lineno, layer);
      for (const auto& x : j["experts"]) {
        if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() >= experts)
          return error("{}:{}: an expert id is out of range (0..{})", path, lineno, experts - 1);
        counts[{int(it - moe_layers.begin()), x.get<int>()}] += 1;
      }
      continue;
    }
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ss(line);
    long long layer, expert, count = 1;
    if (!(ss >> layer)) continue;  // blank line
    if (!(ss >> expert)) return error("{}:{}: expected 'LAYER EXPERT [COUNT]'", path, lineno);
    if (!(ss >> count)) {
      if (!ss.eof()) return error("{}:{}: COUNT is not an integer", path, lineno);
      count = 1;
    }
    std::string extra;
    if (ss.clear(), ss >> extra) return error("{}:{}: unexpected '{}' after the count", path, lineno, extra);
    auto it = std::find(moe_layers.begin(), moe_layers.end(), int(layer));
    if (layer < 0 || it == moe_layers.end()) return error("{}:{}: layer {} is not an MoE layer", path, lineno, layer);
    if (expert < 0 || expert >= experts) return error("{}:{}: expert {} is out of range (0..{})", path, lineno, expert, experts - 1);
    if (count < 0) return error("{}:{}: negative count", path, lineno);
    counts[{int(it - moe_layers.begin()), int(expert)}] += uint64_t(count);
  }
  std::vector<std::pair<std::pair<int, int>, uint64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::pair<int, int>> out;
  for (const auto& [k, c] : v)
    if (c > 0) out.push_back(k);
  return out;
}

std::vector<std::pair<int, int>> default_hot_order(int moe_layers, int experts) {
  std::vector<std::pair<int, int>> out;
  for (int e = 0; e < experts; ++e)
    for (int m = 0; m < moe_layers; ++m) out.push_back({m, e});
  return out;
}

Result<ReplicaSelection> select_replicas(const std::string& replicate_hot, const std::string& replicas_from,
                                         const std::vector<int>& moe_layers, int experts) {
  ReplicaSelection sel;
  const int M = int(moe_layers.size());
  if (!replicas_from.empty()) {
    DF_ASSIGN(sel.hot, read_route_trace(replicas_from, moe_layers, experts));
    sel.replicas = sel.hot.size();
  } else if (!replicate_hot.empty()) {
    sel.hot = default_hot_order(M, experts);
    sel.replicas = uint64_t(M) * uint64_t(experts);
  }
  if (!replicate_hot.empty() && replicate_hot != "all") {
    uint64_t n = 0;
    auto [p, e2] = std::from_chars(replicate_hot.data(), replicate_hot.data() + replicate_hot.size(), n);
    if (e2 != std::errc() || p != replicate_hot.data() + replicate_hot.size())
      return error("--replicate-hot '{}': expected a count or 'all'", replicate_hot);
    sel.replicas = std::min(sel.replicas, n);
  }
  return sel;
}

}  // namespace deltafin
