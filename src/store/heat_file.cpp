#include "store/heat_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace deltafin {

namespace fs = std::filesystem;

void HeatFile::add_run(const std::vector<uint64_t>& run) {
  if (counts.size() != run.size()) counts.assign(run.size(), 0.0);
  for (size_t i = 0; i < run.size(); ++i) counts[i] = kHeatDecay * counts[i] + double(run[i]);
  weight = kHeatDecay * weight + 1.0;
  ++runs;
}

Result<HeatFile> load_heat_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return error("{}: no heat file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception&) {
    return error("{}: not valid JSON", path);
  }
  HeatFile h;
  try {
    if (j.at("format").get<std::string>() != "deltafin-heat-1") return error("{}: not a deltafin heat file", path);
    h.store_id = j.at("store_id").get<std::string>();
    h.moe_layers = j.at("moe_layers").get<int>();
    h.experts = j.at("experts").get<int>();
    h.runs = j.at("runs").get<uint64_t>();
    h.weight = j.at("weight").get<double>();
    h.counts = j.at("counts").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    return error("{}: malformed heat file: {}", path, e.what());
  }
  if (h.moe_layers <= 0 || h.experts <= 0 || h.counts.size() != size_t(h.moe_layers) * size_t(h.experts))
    return error("{}: heat file has {} counts for {} x {} experts", path, h.counts.size(), h.moe_layers, h.experts);
  if (!(h.weight >= 0) || !std::isfinite(h.weight)) return error("{}: heat file weight is invalid", path);
  for (double c : h.counts)
    if (!(c >= 0) || !std::isfinite(c)) return error("{}: heat file has a negative or non-finite count", path);
  return h;
}

Result<HeatFile> load_heat(const std::string& store_dir, const std::string& store_id, int moe_layers, int experts) {
  const std::string path = (fs::path(store_dir) / kHeatFileName).string();
  DF_ASSIGN(HeatFile h, load_heat_file(path));
  if (h.store_id != store_id) return error("{}: heat file is for store {}, not {}", path, h.store_id, store_id);
  if (h.moe_layers != moe_layers || h.experts != experts)
    return error("{}: heat file is for {} x {} experts, the store has {} x {}", path, h.moe_layers, h.experts, moe_layers,
                 experts);
  return h;
}

Status save_heat(const std::string& store_dir, const HeatFile& h) {
  nlohmann::ordered_json j = {{"format", "deltafin-heat-1"}, {"store_id", h.store_id}, {"moe_layers", h.moe_layers},
                              {"experts", h.experts},        {"runs", h.runs},         {"weight", h.weight}};
  // Counts rounded to 1e-3: the file stays small and exact enough to rank by.
  nlohmann::ordered_json counts = nlohmann::ordered_json::array();
  for (double c : h.counts) counts.push_back(std::round(c * 1000) / 1000);
  j["counts"] = std::move(counts);
  const std::string text = j.dump() + "\n";
  const std::string path = (fs::path(store_dir) / kHeatFileName).string();
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot write the heat file: {}", tmp, std::strerror(errno));
  size_t at = 0;
  while (at < text.size()) {
    const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return error("{}: write failed: {}", tmp, std::strerror(e));
    }
    at += size_t(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return error("{}: cannot replace the heat file: {}", path, std::strerror(e));
  }
  return {};
}

}  // namespace deltafin
