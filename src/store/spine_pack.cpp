#include "store/spine_pack.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>

#include "checkpoint/writer.h"
#include "core/row_int8.h"
#include "model/memory_plan.h"

namespace deltafin {

namespace {
constexpr std::string_view kLayerPrefix = "language_model.model.layers.";

// -1: before the layers (embedding); INT_MAX: after them.
int layer_of(const std::string& name) {
  auto p = name.find(kLayerPrefix);
  if (p != std::string::npos) {
    int l = 0;
    size_t i = p + kLayerPrefix.size();
    bool digits = false;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') l = l * 10 + (name[i++] - '0'), digits = true;
    if (digits) return l;
  }
  return name.find("embed_tokens") != std::string::npos ? -1 : INT_MAX;
}

TensorSpec spec_of(const TensorInfo& t) { return TensorSpec{t.name, t.dtype, t.shape}; }

bool converted(const TensorInfo& t, SpineFormat f) { return f == SpineFormat::RowInt8 && spine_int8_selected(t); }
}  // namespace

Result<SpineFormat> spine_format_from_name(const std::string& name) {
  if (name == "bf16") return SpineFormat::BF16;
  if (name == "int8") return SpineFormat::RowInt8;
  return error("spine dtype '{}': expected bf16 or int8", name);
}

std::string spine_label(const std::string& dtype) {
  if (dtype == "int8") return "row-int8 (lossy)";
  if (dtype == "bf16") return "BF16 (weight-exact)";
  return fmt::format("'{}' (unknown)", dtype);
}

bool spine_int8_selected(const TensorInfo& t) {
  if (t.dtype != DType::BF16 || t.shape.size() != 2 || t.numel() % 2 != 0) return false;
  for (std::string_view skip : {"conv1d", "norm", "A_log", "dt_bias", "res_proj", "e_score_correction_bias",
                                ".experts.", "vision", "mm_projector", "embed_tokens"})
    if (t.name.find(skip) != std::string::npos) return false;
  return true;
}

std::vector<TensorSpec> spine_group_specs(const SpineGroup& g, SpineFormat format) {
  std::vector<TensorSpec> specs;
  for (auto* t : g.tensors) {
    if (!converted(*t, format)) {
      specs.push_back(spec_of(*t));
      continue;
    }
    specs.push_back(TensorSpec{t->name, DType::I8, t->shape});
    specs.push_back(TensorSpec{row_int8_scale_name(t->name), DType::F16, {t->shape[0]}});
  }
  return specs;
}

uint64_t SpineGroup::bytes() const {
  uint64_t b = 0;
  for (auto* t : tensors) b += t->nbytes;
  return b;
}

std::vector<SpineGroup> spine_groups(const Checkpoint& ck) {
  std::map<int, SpineGroup> by_layer;
  for (size_t s = 0; s < ck.shards().size(); ++s) {
    std::vector<const TensorInfo*> ts;
    for (const auto& t : ck.shards()[s]->tensors())
      if (!is_routed_expert_tensor(t.name)) ts.push_back(&t);
    std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->file_offset < b->file_offset; });
    for (auto* t : ts) {
      const int l = layer_of(t->name);
      SpineGroup& g = by_layer[l];
      if (g.file.empty())
        g.file = l == -1 ? "spine-embed.safetensors"
                 : l == INT_MAX ? "spine-tail.safetensors"
                                : fmt::format("spine-layer-{:03d}.safetensors", l);
      g.tensors.push_back(t);
    }
  }
  std::vector<SpineGroup> out;
  for (auto& [l, g] : by_layer) out.push_back(std::move(g));
  return out;
}

Status write_spine_group(const SpineGroup& g, SpineFormat format, const std::string& path, Progress* progress) {
  std::map<std::string, const TensorInfo*> src;
  for (auto* t : g.tensors) src[t->name] = t;
  // A converted matrix is quantized when its I8 tensor is written; its scale
  // tensor comes next in the file, so the scales wait here until then.
  std::vector<uint16_t> scales;
  Status failed;
  Status written = write_safetensors(path, spine_group_specs(g, format), [&](const TensorSpec& s, std::span<uint8_t> out) {
    if (s.dtype == DType::F16 && !src.count(s.name)) {  // a row_scale tensor
      std::memcpy(out.data(), scales.data(), out.size());
      return;
    }
    const TensorInfo* t = src.at(s.name);
    if (s.dtype == DType::I8) {
      scales.assign(size_t(t->shape[0]), 0);
      Status st = quantize_rows_int8(reinterpret_cast<const uint16_t*>(t->data), size_t(t->shape[0]),
                                     size_t(t->shape[1]), reinterpret_cast<int8_t*>(out.data()), scales.data(),
                                     fmt::format("{}: tensor '{}'", *t->file, t->name));
      if (!st.ok() && failed.ok()) failed = st;
    } else {
      std::memcpy(out.data(), t->data, out.size());
    }
    if (progress) progress->add(t->nbytes);  // source bytes: the progress total counts those
  });
  DF_TRY(failed);
  return written;
}

bool link_spine_group(const Checkpoint& ck, const SpineGroup& g, const std::string& path) {
  if (g.tensors.empty()) return false;
  const std::string* file = g.tensors[0]->file;
  for (auto* t : g.tensors)
    if (t->file != file) return false;
  for (const auto& shard : ck.shards()) {
    if (&shard->path() != file && shard->path() != *file) continue;
    if (shard->tensors().size() != g.tensors.size()) return false;
    ::unlink(path.c_str());
    return ::link(file->c_str(), path.c_str()) == 0;
  }
  return false;
}

Status write_spine_index(const std::vector<SpineGroup>& groups, SpineFormat format, const std::string& path) {
  std::vector<std::string> names;
  std::vector<std::vector<TensorSpec>> shards;
  for (const auto& g : groups) {
    names.push_back(g.file);
    shards.push_back(spine_group_specs(g, format));
  }
  return write_safetensors_index(path, names, shards);
}

std::vector<std::string> spine_side_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string n = e.path().filename().string();
    if (n.ends_with(".safetensors") || n == "model.safetensors.index.json") continue;
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace deltafin
