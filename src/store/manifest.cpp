#include "store/manifest.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
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

constexpr const char* kSealKey = "manifest_xxh3";

// The seal as dump(1) writes it; the checksum covers the text with the value zeroed.
std::string seal_field(const std::string& hex) { return fmt::format("\"{}\": \"{}\"", kSealKey, hex); }
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
  j["version"] = kManifestVersion;
  j[kSealKey] = std::string(32, '0');  // replaced below by the checksum of this text
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
  j["model"] = {{"model_type", model_type},   {"expert_format", expert_format}, {"num_layers", num_layers},
                {"num_experts", num_experts}, {"expert_bytes", expert_bytes},   {"span_bytes", span_bytes},
                {"align", kSpanAlign},        {"moe_layers", moe_layers}};
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
      if (x.has_sum) sums.push_back(x.xxh3.hex());
      else sums.push_back(nullptr);
      json pl = json::array();
      for (const auto& p : x.at) pl.push_back(json::array({p.drive, p.file, p.offset}));
      at.push_back(pl);
    }
    ex.push_back({{"layer", moe_layers[m]}, {"xxh3", sums}, {"at", at}});
  }
  j["experts"] = ex;
  if (stream)
    j["stream"] = {{"endpoint", stream->endpoint}, {"repo", stream->repo}, {"commit", stream->commit},
                   {"token_file", stream->token_file}, {"headers", ".setup/checkpoint"}};
  std::string text = j.dump(1) + "\n";
  const std::string zeros = seal_field(std::string(32, '0'));
  const size_t at = text.find(zeros);
  text.replace(at, zeros.size(), seal_field(xxh3_128({reinterpret_cast<const uint8_t*>(text.data()), text.size()}).hex()));
  return text;
}

Status Manifest::check_seal(const std::string& text, const std::string& where, bool* sealed) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return error("{}: not valid JSON: {}", where, e.what());
  }
  if (!j.is_object() || j.value("format", "") != "deltafin-store") return error("{}: not a deltafin store manifest", where);
  const auto v = j.find("version");
  const int version = v != j.end() && v->is_number_integer() ? v->get<int>() : -1;
  const auto f = j.find(kSealKey);
  if (f == j.end()) {
    if (version == 1) {
      *sealed = false;
      return {};
    }
    return error("{}: no {} field (a version {} manifest carries a checksum of its own): the manifest was edited or "
                 "damaged",
                 where, kSealKey, version);
  }
  if (!f->is_string() || !Hash128::from_hex(f->get<std::string>()).ok())
    return error("{}: {} is not 32 lowercase hex digits: the manifest was edited or damaged", where, kSealKey);
  const std::string field = seal_field(f->get<std::string>());
  const size_t at = text.find(field);
  if (at == std::string::npos || text.find(field, at + 1) != std::string::npos)
    return error("{}: {} is not written the way prepare writes it: the manifest was edited", where, kSealKey);
  std::string zeroed = text;
  zeroed.replace(at, field.size(), seal_field(std::string(32, '0')));
  const Hash128 h = xxh3_128({reinterpret_cast<const uint8_t*>(zeroed.data()), zeroed.size()});
  if (h.hex() != f->get<std::string>())
    return error("{}: its contents do not match its own checksum ({} {}, contents hash to {}): the manifest was edited "
                 "or damaged after prepare wrote it (`deltafin doctor --store` names the fields that no longer fit "
                 "the files)",
                 where, kSealKey, f->get<std::string>(), h.hex());
  *sealed = true;
  return {};
}

Result<Manifest> Manifest::parse(const std::string& text, const std::string& where) {
  bool sealed = false;
  DF_TRY(check_seal(text, where, &sealed));
  DF_ASSIGN(Manifest m, parse_contents(text, where));
  m.sealed = sealed;
  return m;
}

Result<Manifest> Manifest::parse_contents(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return error("{}: not valid JSON: {}", where, e.what());
  }
  Manifest m;
  m.sealed = false;
  try {
    if (!j.is_object() || j.value("format", "") != "deltafin-store") return error("{}: not a deltafin store manifest", where);
    m.version = j.at("version").get<int>();
    if (m.version < kOldestManifestVersion || m.version > kManifestVersion)
      return error("{}: manifest version {} is not supported (this build reads versions {} to {})", where, m.version,
                   kOldestManifestVersion, kManifestVersion);
    m.store_id = j.at("store_id").get<std::string>();
    if (!safe_name(m.store_id)) return error("{}: store_id '{}' is invalid", where, m.store_id);
    const auto& src = j.at("checkpoint");
    m.source_dir = src.at("dir").get<std::string>();
    for (const auto& f : src.at("files"))
      m.source_files.push_back({f.at("name").get<std::string>(), f.at("size").get<uint64_t>(), f.at("sha256").get<std::string>()});
    const auto& spine = j.at("spine");
    m.spine_dtype = spine.at("dtype").get<std::string>();
    if (m.spine_dtype != "bf16" && m.spine_dtype != "int8")
      return error("{}: spine.dtype '{}': expected bf16 or int8", where, m.spine_dtype);
    std::set<std::string> spine_names;
    for (const auto& f : spine.at("files")) {
      StoreFile s{f.at("name").get<std::string>(), f.at("size").get<uint64_t>(), {}};
      const size_t i = m.spine_files.size();
      if (!safe_name(s.name)) return error("{}: spine.files[{}].name '{}' is invalid", where, i, s.name);
      if (!spine_names.insert(s.name).second) return error("{}: spine.files[{}].name '{}' is listed twice", where, i, s.name);
      auto h = Hash128::from_hex(f.at("xxh3").get<std::string>());
      if (!h.ok()) return error("{}: spine.files[{}].xxh3 ({}): {}", where, i, s.name, h.message());
      s.xxh3 = *h;
      m.spine_files.push_back(s);
    }
    const auto& model = j.at("model");
    if (m.version >= 3) {
      m.model_type = model.at("model_type").get<std::string>();
      m.expert_format = model.at("expert_format").get<std::string>();
      if (m.expert_format != "mxfp4" && m.expert_format != "bf16" && m.expert_format != "fp8_block")
        return error("{}: model.expert_format '{}' is not known (mxfp4, bf16, fp8_block)", where, m.expert_format);
    }
    m.num_layers = model.at("num_layers").get<int>();
    m.num_experts = model.at("num_experts").get<int>();
    m.expert_bytes = model.at("expert_bytes").get<uint64_t>();
    m.span_bytes = model.at("span_bytes").get<uint64_t>();
    m.moe_layers = model.at("moe_layers").get<std::vector<int>>();
    if (m.num_layers <= 0 || m.num_layers > (1 << 20))
      return error("{}: model.num_layers {} is out of range", where, m.num_layers);
    if (m.num_experts <= 0 || m.num_experts > (1 << 24))
      return error("{}: model.num_experts {} is out of range", where, m.num_experts);
    if (m.expert_bytes == 0 || m.expert_bytes > (1ull << 40))
      return error("{}: model.expert_bytes {} is out of range", where, m.expert_bytes);
    if (m.span_bytes != align_up(m.expert_bytes, kSpanAlign))
      return error("{}: model.span_bytes {} != model.expert_bytes {} rounded up to 4 KiB ({})", where, m.span_bytes,
                   m.expert_bytes, align_up(m.expert_bytes, kSpanAlign));
    for (size_t i = 0; i < m.moe_layers.size(); ++i)
      if (m.moe_layers[i] < 0 || m.moe_layers[i] >= m.num_layers || (i && m.moe_layers[i] <= m.moe_layers[i - 1]))
        return error("{}: model.moe_layers must be ascending layer indices below model.num_layers", where);
    for (const auto& d : j.at("drives")) {
      DriveEntry de;
      const size_t di = m.drives.size();
      de.root = d.at("root").get<std::string>();
      de.rate_mb_s = d.at("rate_mb_s").get<double>();
      if (!(de.rate_mb_s > 0) || !std::isfinite(de.rate_mb_s))
        return error("{}: drives[{}].rate_mb_s {} must be a positive number of MB/s", where, di, de.rate_mb_s);
      std::set<std::string> names;
      for (const auto& p : d.at("packs")) {
        StoreFile s{p.at("name").get<std::string>(), p.at("size").get<uint64_t>(), {}};
        const size_t pi = de.packs.size();
        if (!safe_name(s.name)) return error("{}: drives[{}].packs[{}].name '{}' is invalid", where, di, pi, s.name);
        if (!names.insert(s.name).second)
          return error("{}: drives[{}].packs[{}].name '{}' is listed twice", where, di, pi, s.name);
        if (s.size % kSpanAlign)
          return error("{}: drives[{}].packs[{}].size {} ({}) is not a multiple of 4 KiB", where, di, pi, s.size, s.name);
        de.packs.push_back(s);
      }
      m.drives.push_back(std::move(de));
    }
    if (m.drives.empty()) return error("{}: no drives", where);
    if (j.contains("stream")) {
      const auto& st = j.at("stream");
      m.stream = StreamSource{st.at("endpoint").get<std::string>(), st.at("repo").get<std::string>(),
                              st.at("commit").get<std::string>(), st.at("token_file").get<std::string>()};
      if (m.stream->endpoint.empty() || m.stream->repo.empty() || m.stream->commit.empty())
        return error("{}: stream: endpoint, repo and commit must not be empty", where);
    }
    const auto& ex = j.at("experts");
    if (!ex.is_array() || ex.size() != m.moe_layers.size())
      return error("{}: experts: {} layers listed, model.moe_layers has {}", where, ex.size(), m.moe_layers.size());
    // Bytes of spans per pack file: they must fill it exactly (prepare writes
    // nothing else there), and no two may overlap.
    struct SpanAt {
      uint64_t offset;
      std::string field;  // "experts[li].at[e][k] (layer L expert E)"
      bool operator<(const SpanAt& o) const { return offset < o.offset; }
    };
    std::map<std::pair<int, int>, std::vector<SpanAt>> spans;
    for (size_t li = 0; li < ex.size(); ++li) {
      const auto& L = ex[li];
      const int layer = L.at("layer").get<int>();
      if (layer != m.moe_layers[li])
        return error("{}: experts[{}].layer {} != model.moe_layers[{}] ({})", where, li, layer, li, m.moe_layers[li]);
      const auto& sums = L.at("xxh3");
      const auto& at = L.at("at");
      if (!sums.is_array() || !at.is_array() || sums.size() != size_t(m.num_experts) || at.size() != size_t(m.num_experts))
        return error("{}: experts[{}] (layer {}): {} checksums and {} placements for model.num_experts {}", where, li,
                     layer, sums.size(), at.size(), m.num_experts);
      for (int e = 0; e < m.num_experts; ++e) {
        ExpertEntry x;
        if (sums[e].is_null()) {
          // Only a streamed store has experts whose checksum is not known yet.
          if (!m.stream)
            return error("{}: experts[{}].xxh3[{}] (layer {} expert {}): null, and the store is not streamed", where,
                         li, e, layer, e);
          x.has_sum = false;
        } else {
          auto h = Hash128::from_hex(sums[e].get<std::string>());
          if (!h.ok()) return error("{}: experts[{}].xxh3[{}] (layer {} expert {}): {}", where, li, e, layer, e, h.message());
          x.xxh3 = *h;
        }
        for (const auto& p : at[e]) {
          const size_t k = x.at.size();
          if (!p.is_array() || p.size() != 3)
            return error("{}: experts[{}].at[{}][{}] (layer {} expert {}): placement is not [drive, pack, offset]", where,
                         li, e, k, layer, e);
          Placement pl{p[0].get<int>(), p[1].get<int>(), p[2].get<uint64_t>()};
          auto bad = [&](const std::string& why) {
            return error("{}: experts[{}].at[{}][{}] (layer {} expert {}, placement [{}, {}, {}]): {}", where, li, e, k,
                         layer, e, pl.drive, pl.file, pl.offset, why);
          };
          if (pl.drive < 0 || pl.drive >= int(m.drives.size()))
            return bad(fmt::format("drive {} does not exist (drives has {})", pl.drive, m.drives.size()));
          const auto& packs = m.drives[pl.drive].packs;
          if (pl.file < 0 || pl.file >= int(packs.size()))
            return bad(fmt::format("pack {} does not exist (drives[{}].packs has {})", pl.file, pl.drive, packs.size()));
          if (pl.offset % kSpanAlign) return bad("offset is not 4 KiB aligned");
          const uint64_t size = packs[pl.file].size;
          // Written so that no offset can wrap around: offset + span <= size.
          if (pl.offset > size || size - pl.offset < m.span_bytes)
            return bad(fmt::format("offset {} + model.span_bytes {} runs past the end of {} (drives[{}].packs[{}].size "
                                   "{})",
                                   pl.offset, m.span_bytes, packs[pl.file].name, pl.drive, pl.file, size));
          for (const auto& q : x.at)
            if (q.drive == pl.drive) return bad("two placements on the same drive");
          spans[{pl.drive, pl.file}].push_back(
              {pl.offset, fmt::format("experts[{}].at[{}][{}] (layer {} expert {})", li, e, k, layer, e)});
          x.at.push_back(pl);
        }
        if (x.at.empty()) return error("{}: experts[{}].at[{}] (layer {} expert {}): no placement", where, li, e, layer, e);
        m.experts.push_back(std::move(x));
      }
    }
    for (auto& [key, offs] : spans) {
      std::sort(offs.begin(), offs.end());
      for (size_t i = 1; i < offs.size(); ++i)
        if (offs[i].offset - offs[i - 1].offset < m.span_bytes)
          return error("{}: {} and {} overlap: spans at offsets {} and {} of drive {} pack {} (model.span_bytes {})",
                       where, offs[i - 1].field, offs[i].field, offs[i - 1].offset, offs[i].offset, key.first,
                       m.drives[key.first].packs[key.second].name, m.span_bytes);
    }
    for (size_t d = 0; d < m.drives.size(); ++d)
      for (size_t f = 0; f < m.drives[d].packs.size(); ++f) {
        auto it = spans.find({int(d), int(f)});
        const uint64_t used = it == spans.end() ? 0 : it->second.size() * m.span_bytes;
        if (used != m.drives[d].packs[f].size)
          return error("{}: drives[{}].packs[{}].size {} ({}): its placements hold {} spans of model.span_bytes {} = {} "
                       "bytes",
                       where, d, f, m.drives[d].packs[f].size, m.drives[d].packs[f].name,
                       it == spans.end() ? 0 : it->second.size(), m.span_bytes, used);
      }
  } catch (const nlohmann::json::exception& e) {
    return error("{}: missing or mistyped field: {}", where, e.what());
  }
  return m;
}

Result<std::pair<std::string, std::string>> Manifest::read_text(const std::string& store_dir) {
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
  return std::make_pair(ss.str(), path);
}

Result<Manifest> Manifest::load(const std::string& store_dir) {
  DF_ASSIGN(auto text, read_text(store_dir));
  return parse(text.first, text.second);
}

}  // namespace deltafin
