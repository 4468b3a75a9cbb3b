// The spine pack: every tensor that is not a routed expert, rewritten as
// safetensors files in the store's spine/ directory, one file per layer (plus
// one for the embedding and one for the tail), each tensor in source order, so
// a layer is one sequential read and Checkpoint::open + ModelWeights::bind
// read the spine unchanged. The checkpoint's other files (config.json,
// generation_config.json, tokenizer files) are copied next to it.
//
// With the row-int8 spine (explicit, lossy; docs/design/store-and-read-engine.md, "Row-int8 spine") every selected
// matrix (spine_int8_selected) is written as I8 [rows, cols] in its place,
// followed by its F16 [rows] scale tensor `<name>.row_scale`
// (core/row_int8.h); everything else is copied unchanged.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/writer.h"
#include "core/result.h"
#include "store/progress.h"

namespace deltafin {

struct SpineGroup {
  std::string file;  // spine-embed.safetensors, spine-layer-007.safetensors, spine-tail.safetensors
  std::vector<const TensorInfo*> tensors;
  uint64_t bytes() const;
};

enum class SpineFormat { BF16, RowInt8 };

// "bf16" / "int8" (the manifest's spine dtype and the --spine values).
Result<SpineFormat> spine_format_from_name(const std::string& name);
// How run/doctor label a spine: "BF16 (weight-exact)" or "row-int8 (lossy)".
std::string spine_label(const std::string& manifest_dtype);

// Converted by the row-int8 spine: a rank-2 BF16 tensor whose name contains
// none of conv1d, norm, A_log, dt_bias, res_proj, e_score_correction_bias,
// .experts., vision, mm_projector (docs/design/store-and-read-engine.md, "Row-int8 spine"), except the embedding, which
// tokens read as BF16 rows, and tensors with an odd element count (which
// would leave the following tensors at odd offsets).
bool spine_int8_selected(const TensorInfo& t);

std::vector<SpineGroup> spine_groups(const Checkpoint& ck);

// The tensors one group's file holds, in file order.
std::vector<TensorSpec> spine_group_specs(const SpineGroup& g, SpineFormat format);

// Writes one group as a safetensors file at `path` (not atomic: the caller
// writes to a temp name and renames). Fails on a weight row-int8 cannot hold.
Status write_spine_group(const SpineGroup& g, SpineFormat format, const std::string& path, Progress* progress);

// Hard-links the group's source shard to `path` when that shard holds exactly
// the group's tensors (a spine-only checkpoint from make-model is laid out so):
// the store then shares the bytes instead of copying them. False when the
// shard holds other tensors or link() fails (another file system); the caller
// then writes the group.
bool link_spine_group(const Checkpoint& ck, const SpineGroup& g, const std::string& path);

// model.safetensors.index.json for the groups.
Status write_spine_index(const std::vector<SpineGroup>& groups, SpineFormat format, const std::string& path);

// The checkpoint's files that are copied as-is: regular files at the top of
// the directory that are neither safetensors shards nor the shard index.
std::vector<std::string> spine_side_files(const std::string& checkpoint_dir);

}  // namespace deltafin
