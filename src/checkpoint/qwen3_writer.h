// make-model for the Qwen3 presets (checkpoint/qwen3_presets.h): tensors in
// the Hub's layout (model.embed_tokens.weight, model.layers.N.self_attn.q_proj
// ..., mlp.experts.E.gate_proj ..., lm_head.weight unless tied), seeded random
// values, BF16 or the Hub's block-FP8 (E4M3 codes + 128x128 fp32
// weight_scale_inv), written as index + shards + config.json +
// generation_config.json.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/qwen3_presets.h"
#include "checkpoint/writer.h"

namespace deltafin {

// Every tensor in storage order, grouped so a linear's weight and its
// weight_scale_inv stay together (one shard): embedding, each layer (norms,
// attention, FFN: router then experts 0..E-1, or the dense MLP), final norm,
// lm_head unless tied.
std::vector<std::vector<TensorSpec>> qwen3_tensor_groups(const Qwen3Preset& p);

// The value (before any FP8 quantisation) of element i of the linear or
// vector named `name` is a function of (seed, name, shape) only. A BF16
// tensor holds these values rounded to BF16; an FP8 weight quantises the
// same BF16 values per 128x128 block: scale = max|w| / 448 (1 for an
// all-zero block), code = f32_to_e4m3(w / scale), scale_inv = scale.
void fill_qwen3_tensor(const Qwen3Preset& p, uint64_t seed, const TensorSpec& t, std::span<uint8_t> out);

// The BF16 values of the linear `weight_name` ([out, in]) as fp32: what the
// BF16 preset stores and the FP8 preset quantises.
std::vector<float> qwen3_linear_values(uint64_t seed, const std::string& weight_name, int64_t rows, int64_t cols);

// Writes config.json, generation_config.json, model.safetensors.index.json and
// the shards into out_dir (created if needed).
Status write_qwen3_checkpoint(const Qwen3Preset& p, const std::string& out_dir, uint64_t seed);

}  // namespace deltafin
