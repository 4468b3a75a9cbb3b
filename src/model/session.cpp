#include "model/session.h"

namespace deltafin {

Session Session::create(const ModelConfig& cfg) {
  Session s;
  s.kda.resize(cfg.num_layers);
  s.mla.resize(cfg.num_layers);
  const size_t C = cfg.kda.channels(), K = cfg.kda.conv_kernel, D = cfg.kda.head_dim;
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.attention[l] != AttentionKind::KDA) continue;
    auto& k = s.kda[l];
    k.conv_q.assign(C * K, 0.0f);
    k.conv_k.assign(C * K, 0.0f);
    k.conv_v.assign(C * K, 0.0f);
    k.S.assign(size_t(cfg.kda.heads) * D * D, 0.0f);
  }
  return s;
}

void Session::truncate_mla(int64_t new_length, const ModelConfig& cfg) {
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.attention[l] != AttentionKind::MLA) continue;
    mla[l].latent.resize(size_t(new_length) * cfg.mla.kv_lora_rank);
    mla[l].rope_key.resize(size_t(new_length) * cfg.mla.qk_rope_dim);
  }
}

uint64_t Session::bytes() const {
  uint64_t b = 0;
  for (auto& k : kda) b += 4 * (k.conv_q.size() + k.conv_k.size() + k.conv_v.size() + k.S.size());
  for (auto& m : mla) b += 4 * (m.latent.size() + m.rope_key.size());
  return b;
}

}  // namespace deltafin
