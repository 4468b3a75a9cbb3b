// Safetensors writer: one shard from an ordered tensor list (data in list
// order, header offsets to match), plus the HF index over all shards. Data is
// produced by a callback per tensor, or left as a hole (sparse file) so
// full-size metadata checkpoints cost no disk.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace deltafin {

struct TensorSpec {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  uint64_t nbytes() const;
};

// Fills `out` (exactly spec.nbytes() bytes) with the tensor's contents.
using TensorFill = std::function<void(const TensorSpec& spec, std::span<uint8_t> out)>;

// The header a shard with these tensors gets: JSON in list order, padded with
// spaces to a multiple of 8 bytes (as the reference implementation does).
std::string safetensors_header(const std::vector<TensorSpec>& tensors);

// Writes one shard. With `fill` empty the data region is left as a hole
// (ftruncate), so reading it yields zeros.
Status write_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors, const TensorFill& fill);

// A small text file beside the shards (config.json, generation_config.json, ...).
Status write_text(const std::string& path, const std::string& text);

// model.safetensors.index.json: metadata.total_size and weight_map, tensors in
// shard order then list order.
Status write_safetensors_index(const std::string& path, const std::vector<std::string>& shard_names,
                               const std::vector<std::vector<TensorSpec>>& shards);

// HF shard file name; `total_digits` is 5 normally and 6 for K3's published
// spelling (model-00001-of-000096.safetensors).
std::string shard_file_name(int index_one_based, int count, int total_digits = 5);

}  // namespace deltafin
