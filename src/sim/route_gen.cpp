#include "sim/route_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/mt19937_64.h"

namespace deltafin::sim {

namespace {
double unit(Mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }  // [0, 1)
}  // namespace

Result<std::vector<std::vector<std::vector<int>>>> generate_routes(const RouteGenOptions& o) {
  if (o.moe_layers < 1 || o.experts < 1 || o.positions < 1) return error("make-trace: layers, experts and positions must be >= 1");
  if (o.top_k < 1 || o.top_k > o.experts) return error("make-trace: top-k must be 1..experts");
  if (!(o.keep >= 0 && o.keep <= 1)) return error("make-trace: --keep must be in [0, 1]");
  if (!(o.skew >= 0 && o.skew <= 20)) return error("make-trace: --skew must be in [0, 20]");
  Mt19937_64 rng(o.seed);
  const size_t E = size_t(o.experts);
  std::vector<std::vector<double>> cum(size_t(o.moe_layers), std::vector<double>(E));
  for (auto& c : cum) {
    double acc = 0;
    for (size_t e = 0; e < E; ++e) c[e] = acc += std::exp(o.skew * -std::log(1.0 - unit(rng)));
  }
  std::vector<std::vector<std::vector<int>>> routes(size_t(o.positions), std::vector<std::vector<int>>(size_t(o.moe_layers)));
  std::vector<char> taken(E, 0);
  for (size_t p = 0; p < size_t(o.positions); ++p)
    for (size_t m = 0; m < size_t(o.moe_layers); ++m) {
      auto& out = routes[p][m];
      if (p > 0)
        for (int e : routes[p - 1][m])
          if (unit(rng) < o.keep) out.push_back(e), taken[size_t(e)] = 1;
      const auto& c = cum[m];
      while (out.size() < size_t(o.top_k)) {
        const double x = unit(rng) * c.back();
        const size_t e = size_t(std::upper_bound(c.begin(), c.end(), x) - c.begin());
        if (e >= E || taken[e]) continue;
        taken[e] = 1;
        out.push_back(int(e));
      }
      for (int e : out) taken[size_t(e)] = 0;
    }
  return routes;
}

Status write_route_trace(const std::string& path, const RouteGenOptions& o,
                         const std::vector<std::vector<std::vector<int>>>& routes) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return error("{}: cannot open for writing", path);
  for (size_t p = 0; p < routes.size(); ++p)
    for (size_t m = 0; m < routes[p].size(); ++m) {
      std::string line = fmt::format("{{\"pos\":{},\"layer\":{},\"experts\":[", p, o.first_layer + int(m));
      for (size_t i = 0; i < routes[p][m].size(); ++i) line += fmt::format("{}{}", i ? "," : "", routes[p][m][i]);
      line += "]}\n";
      std::fwrite(line.data(), 1, line.size(), f);
    }
  if (std::fclose(f) != 0) return error("{}: write failed", path);
  return {};
}

}  // namespace deltafin::sim
