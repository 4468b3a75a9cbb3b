#include "checkpoint/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace deltafin {

namespace {

constexpr uint64_t kMaxHeaderBytes = 512ull << 20;  // far above K3's largest header

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || i + n >= s.size() + (n == 0)) return false;
    for (int k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  DF_ASSIGN(auto mapped, MappedFile::open(path));
  auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  f->file_ = mapped;
  const uint64_t size = mapped->size();
  if (size < 8) return error("{}: truncated: {} bytes, no header length", path, size);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | mapped->data()[i];
  if (hlen > kMaxHeaderBytes) return error("{}: header length {} is implausible", path, hlen);
  if (hlen > size - 8) return error("{}: header length {} runs past end of file ({} bytes)", path, hlen, size);
  f->header_len_ = hlen;
  std::string_view header(reinterpret_cast<const char*>(mapped->data() + 8), hlen);

  // Parse with a callback so duplicate top-level names are caught (a plain
  // parse would silently keep the last one).
  std::set<std::string> seen;
  std::string duplicate;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (depth == 1 && ev == nlohmann::json::parse_event_t::key) {
      std::string k = parsed.get<std::string>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header.begin(), header.end(), cb);
  } catch (const nlohmann::json::exception& e) {
    return error("{}: header is not valid JSON: {}", path, e.what());
  }
  if (!duplicate.empty()) return error("{}: tensor '{}': duplicate name in header", path, duplicate);
  if (!j.is_object()) return error("{}: header is not a JSON object", path);

  const uint64_t data_size = size - 8 - hlen;
  struct Range { uint64_t b, e; size_t idx; };
  std::vector<Range> ranges;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    if (!valid_utf8(name)) return error("{}: a tensor name is not valid UTF-8", path);
    auto bad = [&](const std::string& what) { return error("{}: tensor '{}': {}", path, name, what); };
    if (!v.is_object()) return bad("entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) return bad("missing dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) return bad("missing shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      return bad("missing data_offsets");
    auto dt = dtype_from_name(v["dtype"].get<std::string>());
    if (!dt) return bad(fmt::format("unknown dtype '{}'", v["dtype"].get<std::string>()));
    TensorInfo t;
    t.name = name;
    t.dtype = *dt;
    uint64_t numel = 1;
    for (auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
      uint64_t x = d.get<uint64_t>();
      if (x > (1ull << 40) || (x && numel > (1ull << 50) / x)) return bad("shape is implausibly large");
      numel *= x;
      t.shape.push_back(int64_t(x));
    }
    auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) return bad("data_offsets must be non-negative integers");
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (e < b) return bad(fmt::format("data_offsets [{}, {}] are reversed", b, e));
    if (e > data_size) return bad(fmt::format("data_offsets [{}, {}] run past the data region ({} bytes)", b, e, data_size));
    if (numel * dtype_size(t.dtype) != e - b)
      return bad(fmt::format("{} {} needs {} bytes but data_offsets span {}", dtype_name(t.dtype), t.shape_str(),
                             numel * dtype_size(t.dtype), e - b));
    t.nbytes = e - b;
    t.file_offset = 8 + hlen + b;
    t.data = mapped->data() + t.file_offset;
    t.file = &mapped->path();
    ranges.push_back({b, e, f->tensors_.size()});
    f->tensors_.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.b < b.b; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].b < ranges[i - 1].e)
      return error("{}: tensor '{}': byte range overlaps tensor '{}'", path, f->tensors_[ranges[i].idx].name,
                   f->tensors_[ranges[i - 1].idx].name);
  }
  return f;
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  auto ck = std::unique_ptr<Checkpoint>(new Checkpoint());
  ck->dir_ = dir;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  DF_ASSIGN(std::string config_text, read_text_file(config_path));
  try {
    ck->config_ = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::exception& e) {
    return error("{}: not valid JSON: {}", config_path, e.what());
  }
  if (!ck->config_.is_object()) return error("{}: not a JSON object", config_path);

  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  std::vector<std::string> shard_names;
  nlohmann::json weight_map;
  if (fs::exists(index_path)) {
    DF_ASSIGN(std::string index_text, read_text_file(index_path));
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(index_text);
    } catch (const nlohmann::json::exception& e) {
      return error("{}: not valid JSON: {}", index_path, e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      return error("{}: no weight_map object", index_path);
    weight_map = index["weight_map"];
    std::set<std::string> names;
    for (auto& [tensor, shard] : weight_map.items()) {
      if (!shard.is_string()) return error("{}: tensor '{}': shard name is not a string", index_path, tensor);
      std::string s = shard.get<std::string>();
      if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
        return error("{}: tensor '{}': invalid shard name '{}'", index_path, tensor, s);
      names.insert(s);
    }
    shard_names.assign(names.begin(), names.end());
  } else {
    shard_names.push_back("model.safetensors");
  }

  for (const auto& s : shard_names) {
    DF_ASSIGN(auto shard, SafetensorsFile::open((fs::path(dir) / s).string()));
    for (const auto& t : shard->tensors()) {
      auto [it, inserted] = ck->by_name_.emplace(std::string_view(t.name), &t);
      if (!inserted) return error("{}: tensor '{}': also present in {}", shard->path(), t.name, *it->second->file);
      if (!weight_map.is_null()) {
        auto w = weight_map.find(t.name);
        if (w == weight_map.end() || w->get<std::string>() != s)
          return error("{}: tensor '{}': not listed for this shard in the index", shard->path(), t.name);
      }
    }
    ck->shards_.push_back(std::move(shard));
  }
  if (!weight_map.is_null()) {
    for (auto& [tensor, shard] : weight_map.items())
      if (!ck->by_name_.count(tensor))
        return error("{}: tensor '{}': listed in the index but missing from shard {}", index_path, tensor,
                     shard.get<std::string>());
  }
  return ck;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<const TensorInfo*> Checkpoint::require(std::string_view name, DType dtype,
                                              const std::vector<int64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (!t) return error("{}: tensor '{}': missing", dir_, name);
  if (t->dtype != dtype)
    return error("{}: tensor '{}': dtype {} but {} expected", *t->file, name, dtype_name(t->dtype), dtype_name(dtype));
  if (t->shape != shape) {
    TensorInfo want;
    want.shape = shape;
    return error("{}: tensor '{}': shape {} but {} expected", *t->file, name, t->shape_str(), want.shape_str());
  }
  return t;
}

}  // namespace deltafin
