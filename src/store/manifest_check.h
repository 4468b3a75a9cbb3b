// The manifest's model fields against the spine's config.json: the layer
// count, which layers are MoE, the experts per layer and each expert's byte
// size (three MXFP4 matrices of expert_inter x latent: packed nibbles plus one
// scale byte per 32 weights). Errors name the manifest field and both values.
#pragma once
#include "core/result.h"
#include "model/config.h"
#include "store/manifest.h"

namespace deltafin {

Status check_manifest_model(const Manifest& m, const ModelConfig& cfg, const std::string& config_path);

}  // namespace deltafin
