// Test-model writer: a complete checkpoint in the published layout (config,
// generation config, index + shards, tokenizer files) for a preset, with
// seeded random weights, or with data left as holes for metadata-only presets.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/presets.h"
#include "checkpoint/writer.h"

namespace deltafin {

// Tensors stored together: one spine tensor, or the six records of one
// routed expert (w1.packed, w1.scale, w2.packed, w2.scale, w3.packed,
// w3.scale), which must stay contiguous and in one shard.
using TensorGroup = std::vector<TensorSpec>;

// Every text tensor of the preset in storage order: embedding, then each layer
// (AttnRes and layer norms, attention, FFN spine, experts 0..E-1), then the
// tail (final norm, output AttnRes norm/projection, lm_head).
std::vector<TensorGroup> preset_tensor_groups(const ModelPreset& p);

// The six records of routed expert `expert` of model layer `layer`, in storage order.
TensorGroup expert_tensor_group(const ModelPreset& p, int layer, int expert);

// Splits the groups over `shards` files by byte position, in order; a group
// never straddles two shards. Fails if a shard would be empty.
Result<std::vector<std::vector<TensorSpec>>> split_into_shards(const std::vector<TensorGroup>& groups, int shards);

// The tensor's bytes for this seed: a function of (seed, name, dtype, shape)
// only, so any tensor can be regenerated and compared on its own.
void fill_random_tensor(const ModelPreset& p, uint64_t seed, const TensorSpec& t, std::span<uint8_t> out);

// What make_model writes for the routed experts: their tensors in the shards
// (a complete checkpoint), or only a generator record (expert_generator.h)
// from which `prepare` regenerates the same bytes straight into a store.
enum class ExpertOutput { InShards, GeneratorRecord };

// Writes the checkpoint into out_dir (created if needed).
Status make_model(const ModelPreset& p, const std::string& out_dir, uint64_t seed,
                  ExpertOutput experts = ExpertOutput::InShards);

}  // namespace deltafin
