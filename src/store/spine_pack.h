// The spine pack: every tensor that is not a routed expert, rewritten as
// safetensors files in the store's spine/ directory, one file per layer (plus
// one for the embedding and one for the tail), each tensor in source order, so
// a layer is one sequential read and Checkpoint::open + ModelWeights::bind
// read the spine unchanged. The checkpoint's other files (config.json,
// generation_config.json, tokenizer files) are copied next to it.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/result.h"
#include "store/progress.h"

namespace deltafin {

struct SpineGroup {
  std::string file;  // spine-embed.safetensors, spine-layer-007.safetensors, spine-tail.safetensors
  std::vector<const TensorInfo*> tensors;
  uint64_t bytes() const;
};

std::vector<SpineGroup> spine_groups(const Checkpoint& ck);

// Writes one group as a safetensors file at `path` (not atomic: the caller
// writes to a temp name and renames).
Status write_spine_group(const SpineGroup& g, const std::string& path, Progress* progress);

// Hard-links the group's source shard to `path` when that shard holds exactly
// the group's tensors (a spine-only checkpoint from make-model is laid out so):
// the store then shares the bytes instead of copying them. False when the
// shard holds other tensors or link() fails (another file system); the caller
// then writes the group.
bool link_spine_group(const Checkpoint& ck, const SpineGroup& g, const std::string& path);

// model.safetensors.index.json for the groups.
Status write_spine_index(const std::vector<SpineGroup>& groups, const std::string& path);

// The checkpoint's files that are copied as-is: regular files at the top of
// the directory that are neither safetensors shards nor the shard index.
std::vector<std::string> spine_side_files(const std::string& checkpoint_dir);

}  // namespace deltafin
