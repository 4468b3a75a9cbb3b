// Reader for the published checkpoint layout: safetensors shards (+ index),
// memory-mapped, with every header validated before any tensor is used.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/result.h"

namespace deltafin {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the shard's mapping
  uint64_t nbytes = 0;
  uint64_t file_offset = 0;       // absolute offset in the shard file
  const std::string* file = nullptr;  // shard path (owned by the file)
  uint64_t numel() const;
  std::string shape_str() const;  // "[a, b]"
};

// One safetensors file. open() validates: header length within the file and
// bounded, JSON object, unique UTF-8 names, known dtypes, shape x dtype size ==
// byte range, ranges inside the data region and not overlapping.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  const std::string& path() const { return file_->path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  uint64_t header_bytes() const { return header_len_; }
  uint64_t data_offset() const { return 8 + header_len_; }

 private:
  std::shared_ptr<MappedFile> file_;
  uint64_t header_len_ = 0;
  std::vector<TensorInfo> tensors_;
};

// A checkpoint directory: config.json, and either model.safetensors.index.json
// with its shards or a single model.safetensors.
class Checkpoint {
 public:
  static Result<std::unique_ptr<Checkpoint>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  size_t tensor_count() const { return by_name_.size(); }

  const TensorInfo* find(std::string_view name) const;
  // The tensor with this exact dtype and shape, or an error naming it.
  Result<const TensorInfo*> require(std::string_view name, DType dtype,
                                    const std::vector<int64_t>& shape) const;

 private:
  std::string dir_;
  nlohmann::json config_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string_view, const TensorInfo*> by_name_;
};

}  // namespace deltafin
