#include "store/manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace deltafin {

namespace {
using json = nlohmann::ordered_json;

json file_json(const StoreFile& f, bool with_hash) {
  json j = {{"name", f.name}, {"size", f.size}};
  if (with_hash) j["xxh3"] = f.xxh3.hex();
  return j;
}

bool safe_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s != "." && s != "..";
}
}  // namespace

std::string Manifest::pack_dir(int drive) const {
  return (std::filesystem::path(drives[drive].root) / ("deltafin-" + store_id)).string();
}

std::string Manifest::pack_path(int drive, size_t pack) const {
  return (std::filesystem::path(pack_dir(drive)) / drives[size_t(drive)].packs[pack].name).string();
}

int Manifest::moe_index(int layer) const {
  auto it = std::lower_bound(moe_layers.begin(), moe_layers.end(), layer);
  return it != moe_layers.end() && *it == layer ? int(it - moe_layers.begin()) : -1;
}

const ExpertEntry* Manifest::expert(int layer, int e) const {
  int m = moe_index(layer);
  if (m < 0 || e < 0 || e >= num_experts) return nullptr;
  return &experts[size_t(m) * num_experts + e];
}

std::string Manifest::to_json() const {
  json j;
  j["format"] = "deltafin-store";
  j["version"] = version;
  j["store_id"] = store_id;
  json src = {{"dir", source_dir}, {"files", json::array()}};
  for (const auto& f : source_files) src["files"].push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  j["checkpoint"] = src;
  json spine = {{"dtype", spine_dtype}, {"dir", kSpineDirName}, {"files", json::array()}};
  // Informational (parse reads only dtype): what a reader of the JSON needs to know.
  spine["weight_exact"] = spine_dtype != "int8";
  if (spine_dtype == "int8") spine["codec"] = "row-i8/f16-scale";
  for (const auto& f : spine_files) spine["files"].push_back(file_json(f, true));
  j["spine"] = spine;
  j["model"] = {{"num_layers", num_layers}, {"num_experts", num_experts}, {"expert_bytes", expert_bytes},
                {"span_bytes", span_bytes}, {"align", kSpanAlign}, {"moe_layers", moe_layers}};
  json drv = json::array();
  for (const auto& d : drives) {
    json dj = {{"root", d.root}, {"rate_mb_s", d.rate_mb_s}, {"packs", json::array()}};
    for (const auto& p : d.packs) dj["packs"].push_back(file_json(p, false));
    drv.push_back(dj);
  }
  j["drives"] = drv;
  // One object per MoE layer: checksums and placements [drive, pack, offset].
  json ex = json::array();
  for (size_t m = 0; m < moe_layers.size(); ++m) {
    json sums = json::array(), at = json::array();
    for (int e = 0; e < num_experts; ++e) {
      const ExpertEntry& x = experts[m * num_experts + e];
      sums.push_back(x.xxh3.hex());
      json pl = json::array();
      for (const auto& p : x.at) pl.push_back(json::array({p.drive, p.file, p.offset}));
      at.push_back(pl);
    }
    ex.push_back({{"layer", moe_layers[m]}, {"xxh3", sums}, {"at", at}});
  }
  j["experts"] = ex;
  return j.dump(1) + "\n";
}

Result<Manifest> Manifest::parse(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return error("{}: not valid JSON: {}", where, e.what());
  }
  Manifest m;
  try {
    if (!j.is_object() || j.value("format", "") != "deltafin-store") return error("{}: not a deltafin store manifest", where);
    m.version = j.at("version").get<int>();
    if (m.version != kManifestVersion)
      return error("{}: manifest version {} is not supported (this build reads version {})", where, m.version,
                   kManifestVersion);
    m.store_id = j.at("store_id").get<std::string>();
    if (!safe_name(m.store_id)) return error("{}: store_id '{}' is invalid", where, m.store_id);
    const auto& src = j.at("checkpoint");
    m.source_dir = src.at("dir").get<std::string>();
    for (const auto& f : src.at("files"))
      m.source_files.push_back({f.at("name").get<std::string>(), f.at("size").get<uint64_t>(), f.at("sha256").get<std::string>()});
    const auto& spine = j.at("spine");
    m.spine_dtype = spine.at("dtype").get<std::string>();
    if (m.spine_dtype != "bf16" && m.spine_dtype != "int8")
      return error("{}: spine dtype '{}': expected bf16 or int8", where, m.spine_dtype);
    for (const auto& f : spine.at("files")) {
      StoreFile s{f.at("name").get<std::string>(), f.at("size").get<uint64_t>(), {}};
      if (!safe_name(s.name)) return error("{}: spine file name '{}' is invalid", where, s.name);
      DF_ASSIGN(s.xxh3, Hash128::from_hex(f.at("xxh3").get<std::string>()));
      m.spine_files.push_back(s);
    }
    const auto& model = j.at("model");
    m.num_layers = model.at("num_layers").get<int>();
    m.num_experts = model.at("num_experts").get<int>();
    m.expert_bytes = model.at("expert_bytes").get<uint64_t>();
    m.span_bytes = model.at("span_bytes").get<uint64_t>();
    m.moe_layers = model.at("moe_layers").get<std::vector<int>>();
    if (m.num_experts <= 0 || m.expert_bytes == 0 || m.span_bytes != align_up(m.expert_bytes, kSpanAlign))
      return error("{}: model: num_experts / expert_bytes / span_bytes are inconsistent", where);
    for (size_t i = 0; i < m.moe_layers.size(); ++i)
      if (m.moe_layers[i] < 0 || m.moe_layers[i] >= m.num_layers || (i && m.moe_layers[i] <= m.moe_layers[i - 1]))
        return error("{}: model.moe_layers must be ascending layer indices below num_layers", where);
    for (const auto& d : j.at("drives")) {
      DriveEntry de;
      de.root = d.at("root").get<std::string>();
      de.rate_mb_s = d.at("rate_mb_s").get<double>();
      for (const auto& p : d.at("packs")) {
        StoreFile s{p.at("name").get<std::string>(), p.at("size").get<uint64_t>(), {}};
        if (!safe_name(s.name)) return error("{}: drive {}: pack name '{}' is invalid", where, de.root, s.name);
        de.packs.push_back(s);
      }
      m.drives.push_back(std::move(de));
    }
    if (m.drives.empty()) return error("{}: no drives", where);
    const auto& ex = j.at("experts");
    if (!ex.is_array() || ex.size() != m.moe_layers.size())
      return error("{}: experts: {} layers listed, model has {} MoE layers", where, ex.size(), m.moe_layers.size());
    // Spans per pack file, to check that none overlap.
    std::map<std::pair<int, int>, std::vector<uint64_t>> spans;
    for (size_t li = 0; li < ex.size(); ++li) {
      const auto& L = ex[li];
      const int layer = L.at("layer").get<int>();
      if (layer != m.moe_layers[li]) return error("{}: experts[{}]: layer {} != moe_layers[{}]", where, li, layer, li);
      const auto& sums = L.at("xxh3");
      const auto& at = L.at("at");
      if (sums.size() != size_t(m.num_experts) || at.size() != size_t(m.num_experts))
        return error("{}: layer {}: {} checksums and {} placements for {} experts", where, layer, sums.size(), at.size(),
                     m.num_experts);
      for (int e = 0; e < m.num_experts; ++e) {
        ExpertEntry x;
        DF_ASSIGN(x.xxh3, Hash128::from_hex(sums[e].get<std::string>()));
        for (const auto& p : at[e]) {
          if (!p.is_array() || p.size() != 3) return error("{}: layer {} expert {}: placement is not [drive, pack, offset]", where, layer, e);
          Placement pl{p[0].get<int>(), p[1].get<int>(), p[2].get<uint64_t>()};
          auto bad = [&](const std::string& why) {
            return error("{}: layer {} expert {}: placement [{}, {}, {}]: {}", where, layer, e, pl.drive, pl.file, pl.offset, why);
          };
          if (pl.drive < 0 || pl.drive >= int(m.drives.size())) return bad("no such drive");
          const auto& packs = m.drives[pl.drive].packs;
          if (pl.file < 0 || pl.file >= int(packs.size())) return bad("no such pack file");
          if (pl.offset % kSpanAlign) return bad("offset is not 4 KiB aligned");
          if (pl.offset + m.span_bytes > packs[pl.file].size) return bad("span runs past the end of " + packs[pl.file].name);
          for (const auto& q : x.at)
            if (q.drive == pl.drive) return bad("two placements on the same drive");
          spans[{pl.drive, pl.file}].push_back(pl.offset);
          x.at.push_back(pl);
        }
        if (x.at.empty()) return error("{}: layer {} expert {}: no placement", where, layer, e);
        m.experts.push_back(std::move(x));
      }
    }
    for (auto& [key, offs] : spans) {
      std::sort(offs.begin(), offs.end());
      for (size_t i = 1; i < offs.size(); ++i)
        if (offs[i] < offs[i - 1] + m.span_bytes)
          return error("{}: drive {} pack {}: spans at offsets {} and {} overlap", where, key.first,
                       m.drives[key.first].packs[key.second].name, offs[i - 1], offs[i]);
    }
  } catch (const nlohmann::json::exception& e) {
    return error("{}: missing or mistyped field: {}", where, e.what());
  }
  return m;
}

Result<Manifest> Manifest::load(const std::string& store_dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(store_dir) / kManifestName).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (fs::exists(fs::path(store_dir) / ".prepare"))
      return error("{}: store is incomplete (an interrupted prepare): run `deltafin prepare` again with the same options",
                   store_dir);
    return error("{}: no {} (not a deltafin store)", store_dir, kManifestName);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

}  // namespace deltafin
