#include "checkpoint/safetensors.h"

#include "core/files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>

namespace deltafin {

namespace {

constexpr uint64_t kMaxHeaderBytes = 512ull << 20;  // far above K3's largest header

// Offset of the first byte that is not part of well-formed UTF-8 (no
// overlongs, surrogates or code points past U+10FFFF), or npos.
size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07;
    else return i;
    if (i + n >= s.size()) return i;  // sequence cut off by the end
    for (int k = 1; k <= n; ++k) {
      const unsigned char d = s[i + k];
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

// A name as it can be printed on one line: control and non-ASCII bytes as \xNN.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') out += char(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

// Where byte `pos` of a JSON text stands, found lexically: inside a string
// literal (quotes toggle, a backslash escapes the next byte) or not; for one
// inside, where its quotes are and whether it is a key (a ':' follows it).
struct StringAt {
  bool inside = false, key = false;
  size_t begin = 0, end = 0;  // the literal's contents, without quotes
};
StringAt string_at(std::string_view s, size_t pos) {
  bool in = false;
  size_t open = 0;
  for (size_t i = 0; i < pos; ++i) {
    if (in && s[i] == '\\') ++i;
    else if (s[i] == '"') in = !in, open = i;
  }
  if (!in) return {};
  StringAt at{true, false, open + 1, s.size()};
  for (size_t i = pos; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '"') {
      at.end = i;
      size_t j = i + 1;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r')) ++j;
      at.key = j < s.size() && s[j] == ':';
      break;
    }
  }
  return at;
}

// Names must be UTF-8 (the JSON parser would reject them too, but with a
// message that quotes raw bytes). Name the quoted string holding the bad
// byte; a bad byte outside any string is left to the JSON parser, which
// reports the header as invalid JSON (random bytes are not a tensor name).
Status check_header_utf8(const std::string& path, std::string_view header) {
  const size_t bad = first_invalid_utf8(header);
  if (bad == std::string_view::npos) return {};
  const StringAt at = string_at(header, bad);
  if (!at.inside) return {};
  const std::string text = printable(header.substr(at.begin, std::min<size_t>(at.end - at.begin, 200)));
  if (at.key) return error("{}: tensor '{}': name is not valid UTF-8 (header byte {})", path, text, bad);
  return error("{}: header string '{}' is not valid UTF-8 (header byte {})", path, text, bad);
}

struct DuplicateKeyFinder : nlohmann::json_sax<nlohmann::json> {
  int depth = 0;
  std::unordered_set<std::string> seen;
  std::string duplicate, error_text;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (depth == 1 && !seen.insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_text = e.what();
    return false;
  }
};


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

  // A header is one JSON object: bytes that do not even start one are
  // damage, not a tensor with a bad name.
  const size_t first = header.find_first_not_of(" \t\n\r");
  if (first == std::string_view::npos) return error("{}: header is not valid JSON: it is empty", path);
  if (header[first] != '{')
    return error("{}: header is not valid JSON: it starts with byte 0x{:02x} at header byte {}, not '{{'", path,
                 uint8_t(header[first]), first);
  DF_TRY(check_header_utf8(path, header));
  // A first SAX pass catches duplicate top-level names (a DOM parse silently
  // keeps the last one). nlohmann's callback parser is quadratic in the
  // number of keys, so it is not used here.
  DuplicateKeyFinder finder;
  nlohmann::json::sax_parse(header.begin(), header.end(), &finder);
  if (!finder.error_text.empty()) return error("{}: header is not valid JSON: {}", path, printable(finder.error_text));
  if (!finder.duplicate.empty())
    return error("{}: tensor '{}': duplicate name in header", path, printable(finder.duplicate));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header.begin(), header.end());
  } catch (const nlohmann::json::exception& e) {
    return error("{}: header is not valid JSON: {}", path, printable(e.what()));
  }
  if (!j.is_object()) return error("{}: header is not a JSON object", path);

  const uint64_t data_size = size - 8 - hlen;
  struct Range { uint64_t b, e; size_t idx; };
  std::vector<Range> ranges;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      // Free-form string to string map in the format; anything else is malformed.
      if (!v.is_object()) return error("{}: __metadata__ is not an object", path);
      for (auto& [k, mv] : v.items())
        if (!mv.is_string()) return error("{}: __metadata__ entry '{}' is not a string", path, printable(k));
      continue;
    }
    auto bad = [&](const std::string& what) { return error("{}: tensor '{}': {}", path, printable(name), what); };
    if (!v.is_object()) return bad("entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) return bad("missing dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) return bad("missing shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      return bad("missing data_offsets");
    auto dt = dtype_from_name(v["dtype"].get<std::string>());
    if (!dt) return bad(fmt::format("unknown dtype '{}'", printable(v["dtype"].get<std::string>())));
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
  // The ranges must tile the data region exactly (as the reference
  // implementation requires): no overlap, no gap, no trailing bytes. A short
  // file shows up as a range running past the data region above.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.b != b.b ? a.b < b.b : a.e < b.e; });
  auto tname = [&](size_t i) { return printable(f->tensors_[ranges[i].idx].name); };
  uint64_t covered = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && ranges[i].b < ranges[i - 1].e)
      return error("{}: tensor '{}': byte range [{}, {}] overlaps tensor '{}' [{}, {}]", path, tname(i), ranges[i].b,
                   ranges[i].e, tname(i - 1), ranges[i - 1].b, ranges[i - 1].e);
    if (ranges[i].b > covered)
      return error("{}: tensor '{}': {} unused bytes before its data_offsets [{}, {}]", path, tname(i),
                   ranges[i].b - covered, ranges[i].b, ranges[i].e);
    covered = ranges[i].e;
  }
  if (covered != data_size)
    return error("{}: {} trailing bytes after the last tensor's data (data region {} bytes)", path, data_size - covered,
                 data_size);
  return f;
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  auto ck = std::unique_ptr<Checkpoint>(new Checkpoint());
  ck->dir_ = dir;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  DF_ASSIGN(std::string config_text, read_file(config_path));
  try {
    ck->config_ = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::exception& e) {
    return error("{}: not valid JSON: {}", config_path, printable(e.what()));
  }
  if (!ck->config_.is_object()) return error("{}: not a JSON object", config_path);

  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  std::vector<std::string> shard_names;
  nlohmann::json weight_map;
  if (fs::exists(index_path)) {
    DF_ASSIGN(std::string index_text, read_file(index_path));
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(index_text);
    } catch (const nlohmann::json::exception& e) {
      return error("{}: not valid JSON: {}", index_path, printable(e.what()));
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      return error("{}: no weight_map object", index_path);
    weight_map = index["weight_map"];
    std::set<std::string> names;
    for (auto& [tensor, shard] : weight_map.items()) {
      if (!shard.is_string()) return error("{}: tensor '{}': shard name is not a string", index_path, tensor);
      std::string s = shard.get<std::string>();
      if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
        return error("{}: tensor '{}': invalid shard name '{}'", index_path, tensor, printable(s));
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
  if (!t) return error("{}: tensor '{}': missing from the checkpoint", dir_, name);
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
