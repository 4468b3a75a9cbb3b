#include "checkpoint/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace deltafin {

uint64_t TensorSpec::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

std::string safetensors_header(const std::vector<TensorSpec>& tensors) {
  // Built as text: ordered_json's linear key lookup is quadratic for the
  // thousands of tensors of a K3 shard. Names are escaped by the JSON library.
  std::string s = R"({"__metadata__":{"format":"pt"})";
  uint64_t off = 0;
  for (const auto& t : tensors) {
    const uint64_t n = t.nbytes();
    s += fmt::format(R"(,{}:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", nlohmann::json(t.name).dump(),
                     dtype_name(t.dtype), fmt::join(t.shape, ","), off, off + n);
    off += n;
  }
  s += '}';
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

namespace {

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};

Status write_all(FILE* f, const std::string& path, const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f) != n) return error("{}: write failed: {}", path, std::strerror(errno));
  return {};
}

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors, const TensorFill& fill) {
  const std::string header = safetensors_header(tensors);
  uint64_t data_size = 0;
  for (const auto& t : tensors) data_size += t.nbytes();
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) return error("{}: cannot create: {}", path, std::strerror(errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  DF_TRY(write_all(f.get(), path, len, 8));
  DF_TRY(write_all(f.get(), path, header.data(), header.size()));
  if (fill) {
    std::vector<uint8_t> buf;
    for (const auto& t : tensors) {
      buf.assign(t.nbytes(), 0);
      fill(t, std::span<uint8_t>(buf));
      DF_TRY(write_all(f.get(), path, buf.data(), buf.size()));
    }
  }
  if (std::fflush(f.get()) != 0) return error("{}: write failed: {}", path, std::strerror(errno));
  if (!fill) {
    // A hole: the file gets its full size without any data blocks.
    if (ftruncate(fileno(f.get()), off_t(8 + header.size() + data_size)) != 0)
      return error("{}: cannot extend to {} bytes: {}", path, 8 + header.size() + data_size, std::strerror(errno));
  }
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) return error("{}: close failed: {}", path, std::strerror(errno));
  return {};
}

Status write_safetensors_index(const std::string& path, const std::vector<std::string>& shard_names,
                               const std::vector<std::vector<TensorSpec>>& shards) {
  if (shard_names.size() != shards.size()) return error("{}: {} shard names for {} shards", path, shard_names.size(), shards.size());
  // Written as text in shard order (a JSON object type would sort or search
  // linearly; K3 has half a million entries).
  uint64_t total = 0;
  for (const auto& shard : shards)
    for (const auto& t : shard) total += t.nbytes();
  std::string text = fmt::format("{{\n  \"metadata\": {{\n    \"total_size\": {}\n  }},\n  \"weight_map\": {{", total);
  bool first = true;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string shard = nlohmann::json(shard_names[s]).dump();
    for (const auto& t : shards[s]) {
      text += first ? "\n    " : ",\n    ";
      text += nlohmann::json(t.name).dump();
      text += ": ";
      text += shard;
      first = false;
    }
  }
  text += "\n  }\n}\n";
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f) return error("{}: cannot create: {}", path, std::strerror(errno));
  DF_TRY(write_all(f.get(), path, text.data(), text.size()));
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) return error("{}: close failed: {}", path, std::strerror(errno));
  return {};
}

std::string shard_file_name(int index_one_based, int count, int total_digits) {
  return fmt::format("model-{:05d}-of-{:0{}d}.safetensors", index_one_based, count, total_digits);
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return error("{}: cannot create", path);
  f << text;
  f.close();
  if (!f) return error("{}: write failed", path);
  return {};
}

}  // namespace deltafin
