// make-model for DSpark: a checkpoint in DSpark's published layout (one
// model.safetensors with the release's tensor names, config.json with
// model_type "k3_dspark"), sized for a given target and filled with seeded
// random BF16 weights. No DSpark weights can be downloaded here; this is the
// layout the loader reads and the subject of the PyTorch reference test.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/writer.h"
#include "core/result.h"
#include "model/config.h"

namespace deltafin {

struct DsparkShape {
  int hidden = 0, vocab = 0, layers = 2, heads = 0;
  int q_lora = 0, kv_lora = 0, nope = 32, rope = 32, v_head = 32, inter = 0;
  int markov_rank = 32, block_size = 7, mask_token_id = 0;
  std::vector<int> target_layers;
  // K3 DSpark's rotary: YaRN, theta 50000, factor 32 over 32768 positions.
  double rope_theta = 50000, yarn_factor = 32;
  int64_t original_max_positions = 32768;
};

// A small DSpark for `target`: 2 layers, heads of 32+32 / 32, about
// target.num_layers/93 x 5 target layers (at least 2, evenly spread), the
// mask id at K3's offset among the 256 specials (vocab - 3).
DsparkShape dspark_shape_for(const ModelConfig& target);

nlohmann::ordered_json dspark_config_json(const DsparkShape& s);
std::vector<TensorSpec> dspark_tensors(const DsparkShape& s);

// Writes config.json and model.safetensors into out_dir.
Status write_dspark_checkpoint(const DsparkShape& s, const std::string& out_dir, uint64_t seed);

}  // namespace deltafin
