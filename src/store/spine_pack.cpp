#include "store/spine_pack.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>

#include "checkpoint/writer.h"
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
}  // namespace

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

Status write_spine_group(const SpineGroup& g, const std::string& path, Progress* progress) {
  std::vector<TensorSpec> specs;
  std::map<std::string, const TensorInfo*> src;
  for (auto* t : g.tensors) specs.push_back(spec_of(*t)), src[t->name] = t;
  return write_safetensors(path, specs, [&](const TensorSpec& s, std::span<uint8_t> out) {
    const TensorInfo* t = src.at(s.name);
    std::memcpy(out.data(), t->data, out.size());
    if (progress) progress->add(out.size());
  });
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

Status write_spine_index(const std::vector<SpineGroup>& groups, const std::string& path) {
  std::vector<std::string> names;
  std::vector<std::vector<TensorSpec>> shards;
  for (const auto& g : groups) {
    names.push_back(g.file);
    shards.emplace_back();
    for (auto* t : g.tensors) shards.back().push_back(spec_of(*t));
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
