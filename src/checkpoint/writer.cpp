#include "checkpoint/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

namespace deltafin {

uint64_t TensorSpec::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

std::string safetensors_header(const std::vector<TensorSpec>& tensors) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const auto& t : tensors) {
    const uint64_t n = t.nbytes();
    h[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string s = h.dump();
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
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    for (const auto& t : shards[s]) {
      weight_map[t.name] = shard_names[s];
      total += t.nbytes();
    }
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", std::move(weight_map)}};
  const std::string text = index.dump(2) + "\n";
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

}  // namespace deltafin
