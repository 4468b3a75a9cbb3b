#include "sim/trace_stats.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/json_lines.h"
#include "store/tier_policy.h"

namespace deltafin::sim {

Result<TraceRoutes> read_trace_routes(const std::string& path, int experts) {
  std::map<int, std::map<int, std::set<int>>> routes;  // pos -> layer -> experts
  struct RawGuess {
    int pos, rows, layer;
    std::set<int> ids;
  };
  std::vector<RawGuess> raw;
  std::set<int> layers;
  int max_id = -1;
  auto ids_of = [&](const nlohmann::json& a, std::set<int>& out, int lineno) -> Status {
    for (const auto& x : a) {
      if (!x.is_number_integer() || x.get<long long>() < 0 || (experts > 0 && x.get<long long>() >= experts) ||
          x.get<long long>() > 1'000'000)
        return error("{}:{}: an expert id is out of range", path, lineno);
      out.insert(x.get<int>());
      max_id = std::max(max_id, x.get<int>());
    }
    return {};
  };
  const std::string expected = R"({"pos":P,"layer":L,"experts":[...]} or {"pos":P,"layer":L,"rows":T,"guess":[...]})";
  DF_TRY(for_each_json_line(path, expected, [&](const nlohmann::json& j, int lineno) -> Status {
    const bool guess = j.is_object() && j.contains("guess") && j["guess"].is_array();
    const bool route = j.is_object() && j.contains("experts") && j["experts"].is_array();
    if (!(guess || route) || !j.contains("pos") || !j["pos"].is_number_integer() || !j.contains("layer") ||
        !j["layer"].is_number_integer())
      return error("{}:{}: expected {}", path, lineno, expected);
    const long long pos = j["pos"].get<long long>(), layer = j["layer"].get<long long>();
    if (pos < 0 || pos > 1'000'000'000 || layer < 0 || layer > 1'000'000)
      return error("{}:{}: position or layer out of range", path, lineno);
    layers.insert(int(layer));
    if (route) {
      DF_TRY(ids_of(j["experts"], routes[int(pos)][int(layer)], lineno));
    } else {
      const long long rows = j.contains("rows") && j["rows"].is_number_integer() ? j["rows"].get<long long>() : 1;
      if (rows < 1 || rows > 1'000'000) return error("{}:{}: rows out of range", path, lineno);
      RawGuess g{int(pos), int(rows), int(layer), {}};
      DF_TRY(ids_of(j["guess"], g.ids, lineno));
      raw.push_back(std::move(g));
    }
    return {};
  }));
  if (routes.empty()) return error("{}: the route trace has no routes", path);
  TraceRoutes t;
  t.layers.assign(layers.begin(), layers.end());
  t.experts = experts > 0 ? experts : max_id + 1;
  auto moe_index = [&](int layer) { return int(std::lower_bound(t.layers.begin(), t.layers.end(), layer) - t.layers.begin()); };
  for (const auto& [pos, by_layer] : routes) {
    t.positions.push_back(pos);
    std::vector<std::vector<int>> row(t.layers.size());
    for (const auto& [layer, ex] : by_layer) row[size_t(moe_index(layer))].assign(ex.begin(), ex.end());
    t.routes.push_back(std::move(row));
  }
  for (auto& g : raw) t.guesses.push_back({g.pos, g.rows, moe_index(g.layer), std::vector<int>(g.ids.begin(), g.ids.end())});
  return t;
}

namespace {

size_t intersect(const std::vector<int>& a, const std::vector<int>& b) {
  size_t n = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) ++n, ++i, ++j;
    else if (a[i] < b[j]) ++i;
    else ++j;
  }
  return n;
}

std::vector<int> union_of(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<std::vector<int>> tier_requests(const TraceRoutes& t, int prompt_tokens, size_t* prefill_groups) {
  const size_t M = t.layers.size();
  std::vector<std::vector<int>> groups, block(M);
  bool any_block = false;
  for (size_t p = 0; p < t.positions.size() && t.positions[p] < prompt_tokens; ++p)
    for (size_t m = 0; m < M; ++m) block[m] = union_of(block[m], t.routes[p][m]), any_block = true;
  *prefill_groups = 0;
  auto key_group = [&](size_t m, const std::vector<int>& ex) {
    std::vector<int> g;
    for (int e : ex) g.push_back(int(m) * t.experts + e);
    return g;
  };
  if (any_block)
    for (size_t m = 0; m < M; ++m)
      if (!block[m].empty()) groups.push_back(key_group(m, block[m])), ++*prefill_groups;
  for (size_t p = 0; p < t.positions.size(); ++p) {
    if (t.positions[p] < prompt_tokens) continue;
    for (size_t m = 0; m < M; ++m)
      if (!t.routes[p][m].empty()) groups.push_back(key_group(m, t.routes[p][m]));
  }
  return groups;
}

TierReplay replay_tier(const std::vector<std::vector<int>>& groups, size_t keys, size_t slots, size_t prefill_groups,
                       uint64_t age_every, size_t window) {
  TierReplay r;
  r.slots = slots;
  // The policy, in the store source's order.
  TierGroups pol(keys, slots, age_every, window);
  std::vector<int> misses;
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint64_t hits0 = pol.hits;
    pol.run(groups[g], &misses);
    if (g >= prefill_groups) r.decode_requests += groups[g].size(), r.decode_policy_hits += pol.hits - hits0;
  }
  r.requests = pol.requests, r.policy_hits = pol.hits;
  // Hindsight top-`slots` by the trace's own counts, each kept from its first
  // use on and never evicted (its first request misses, as for the others, so
  // Belady bounds it): the best a tier that never adapts can do.
  {
    std::vector<uint64_t> count(keys, 0);
    for (const auto& g : groups)
      for (int key : g) ++count[size_t(key)];
    std::vector<int> order(keys);
    for (size_t k = 0; k < keys; ++k) order[k] = int(k);
    const size_t top = std::min(slots, keys);
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(top), order.end(),
                      [&](int a, int b) { return count[size_t(a)] != count[size_t(b)] ? count[size_t(a)] > count[size_t(b)] : a < b; });
    std::vector<char> in(keys, 0);
    for (size_t i = 0; i < top; ++i) in[size_t(order[i])] = 1;
    for (size_t g = 0; g < groups.size(); ++g)
      for (int key : groups[g]) {
        if (in[size_t(key)] == 2) ++r.static_hits, r.decode_static_hits += g >= prefill_groups;
        if (in[size_t(key)] == 1) in[size_t(key)] = 2;  // filled at its first use
      }
  }
  // Belady with bypass over the flattened requests.
  std::vector<int> seq;
  std::vector<size_t> group_of;
  for (size_t g = 0; g < groups.size(); ++g)
    for (int key : groups[g]) seq.push_back(key), group_of.push_back(g);
  const size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<size_t> next(seq.size(), kNever), last(keys, kNever);
  for (size_t i = seq.size(); i-- > 0;) {
    next[i] = last[size_t(seq[i])];
    last[size_t(seq[i])] = i;
  }
  std::vector<size_t> resident_next(keys, kNever);
  std::vector<char> resident(keys, 0);
  std::set<std::pair<size_t, int>> by_next;  // (next use, key), latest last
  for (size_t i = 0; i < seq.size(); ++i) {
    const int key = seq[i];
    const bool decode = group_of[i] >= prefill_groups;
    if (resident[size_t(key)]) {
      ++r.belady_hits, r.decode_belady_hits += decode;
      by_next.erase({resident_next[size_t(key)], key});
      if (next[i] == kNever) {
        resident[size_t(key)] = 0;  // never used again: its slot is as good as free
      } else {
        resident_next[size_t(key)] = next[i];
        by_next.insert({next[i], key});
      }
      continue;
    }
    if (next[i] == kNever || slots == 0) continue;  // bypass
    if (by_next.size() == slots) {
      auto victim = std::prev(by_next.end());
      if (victim->first <= next[i]) continue;  // every resident is needed sooner: bypass
      resident[size_t(victim->second)] = 0;
      by_next.erase(victim);
    }
    resident[size_t(key)] = 1;
    resident_next[size_t(key)] = next[i];
    by_next.insert({next[i], key});
  }
  return r;
}

TraceStats trace_stats(const TraceRoutes& t, const std::vector<int>& union_ks, const std::vector<uint64_t>& tier_slots,
                       int prompt_tokens, uint64_t age_every, size_t window) {
  TraceStats s;
  const size_t M = t.layers.size(), P = t.positions.size(), E = size_t(t.experts);
  s.positions = int(P), s.layers = int(M);
  uint64_t cells = 0, routed = 0;
  for (size_t p = 0; p < P; ++p)
    for (size_t m = 0; m < M; ++m)
      if (!t.routes[p][m].empty()) ++cells, routed += t.routes[p][m].size();
  s.per_position = cells ? double(routed) / double(cells) : 0;

  // Persistence: consecutive positions, same layer.
  double kept = 0;
  for (size_t p = 1; p < P; ++p) {
    if (t.positions[p] != t.positions[p - 1] + 1) continue;
    for (size_t m = 0; m < M; ++m) {
      const auto &a = t.routes[p][m], &b = t.routes[p - 1][m];
      if (a.empty() || b.empty()) continue;
      kept += double(intersect(a, b)) / double(a.size());
      ++s.persistence_pairs;
    }
  }
  s.persistence = s.persistence_pairs ? kept / double(s.persistence_pairs) : 0;

  // Guesses against the union of their block's routes.
  std::map<int, size_t> index_of;
  for (size_t p = 0; p < P; ++p) index_of[t.positions[p]] = p;
  std::vector<double> recall_sum(M, 0);
  std::vector<uint64_t> recall_n(M, 0);
  double recall = 0, precision = 0;
  for (const auto& g : t.guesses) {
    std::vector<int> actual;
    for (int r = 0; r < g.rows; ++r)
      if (auto it = index_of.find(g.pos + r); it != index_of.end())
        actual = union_of(actual, t.routes[it->second][size_t(g.moe_index)]);
    if (actual.empty()) continue;
    const double hit = double(intersect(actual, g.experts));
    const double rc = hit / double(actual.size());
    recall += rc;
    precision += g.experts.empty() ? 0 : hit / double(g.experts.size());
    recall_sum[size_t(g.moe_index)] += rc, recall_n[size_t(g.moe_index)]++;
    ++s.guess_blocks;
  }
  if (s.guess_blocks) s.guess_recall = recall / double(s.guess_blocks), s.guess_precision = precision / double(s.guess_blocks);
  for (size_t m = 0; m < M; ++m) s.guess_recall_by_layer.push_back(recall_n[m] ? recall_sum[m] / double(recall_n[m]) : -1);

  // Popularity skew per layer.
  uint64_t top_routes = 0;
  for (size_t m = 0; m < M; ++m) {
    std::vector<double> count(E, 0);
    for (size_t p = 0; p < P; ++p)
      for (int e : t.routes[p][m]) count[size_t(e)] += 1;
    std::vector<double> sorted = count;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    double total = 0;
    for (double c : count) total += c;
    if (total == 0) continue;
    double typical = median(count);
    if (typical == 0) typical = total / double(E);
    s.skew_by_layer.push_back(sorted[0] / typical);
    const size_t tenth = std::max<size_t>(1, E / 10);
    for (size_t i = 0; i < tenth; ++i) top_routes += uint64_t(sorted[i]);
  }
  if (!s.skew_by_layer.empty()) {
    s.skew_median = median(s.skew_by_layer);
    s.skew_min = *std::min_element(s.skew_by_layer.begin(), s.skew_by_layer.end());
    s.skew_max = *std::max_element(s.skew_by_layer.begin(), s.skew_by_layer.end());
  }
  s.top_tenth_share = routed ? double(top_routes) / double(routed) : 0;

  // Union of k consecutive positions (windows that start at multiples of k).
  for (int k : union_ks) {
    if (k < 1) continue;
    double sum = 0;
    uint64_t n = 0;
    for (size_t p0 = 0; p0 + size_t(k) <= P; p0 += size_t(k))
      for (size_t m = 0; m < M; ++m) {
        std::vector<int> u;
        for (size_t p = p0; p < p0 + size_t(k); ++p) u = union_of(u, t.routes[p][m]);
        if (u.empty()) continue;
        sum += double(u.size());
        ++n;
      }
    UnionSize us{k, n ? sum / double(n) : 0, 0};
    us.of_routed = s.per_position > 0 ? us.mean / (double(k) * s.per_position) : 0;
    s.unions.push_back(us);
  }

  size_t prefill_groups = 0;
  const auto groups = tier_requests(t, prompt_tokens, &prefill_groups);
  for (uint64_t slots : tier_slots) s.tiers.push_back(replay_tier(groups, M * E, size_t(slots), prefill_groups, age_every,
                   window == kDefaultWindow ? tier_window(size_t(slots), size_t(std::llround(s.per_position * double(M))))
                                            : window));
  return s;
}

}  // namespace deltafin::sim
