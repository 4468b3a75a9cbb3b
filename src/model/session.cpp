#include "model/session.h"

namespace deltafin {

void MlaLayerCache::init(size_t latent_dim, size_t rope_dim) {
  latent_dim_ = latent_dim;
  rope_dim_ = rope_dim;
  length_ = 0;
  chunks_.clear();
}

void MlaLayerCache::reserve(size_t n) {
  while (chunks_.size() * kChunk < n) chunks_.emplace_back(kChunk * (latent_dim_ + rope_dim_), 0.0f);
}

void MlaLayerCache::truncate(size_t n) {
  if (n < length_) length_ = n;
  const size_t keep = n / kChunk + 1;
  if (chunks_.size() > keep) chunks_.resize(keep);
}

Session Session::create(const ModelConfig& cfg) {
  Session s;
  s.kda.resize(cfg.num_layers);
  s.mla.resize(cfg.num_layers);
  s.kv.resize(cfg.num_layers);
  const size_t C = cfg.kda.channels(), K = cfg.kda.conv_kernel, D = cfg.kda.head_dim;
  for (int l = 0; l < cfg.num_layers; ++l) {
    if (cfg.attention[l] == AttentionKind::MLA) {
      s.mla[l].init(size_t(cfg.mla.kv_lora_rank), size_t(cfg.mla.qk_rope_dim));
      continue;
    }
    if (cfg.attention[l] == AttentionKind::GQA) {
      s.kv[l].init(size_t(cfg.gqa.kv_dim()));
      continue;
    }
    auto& k = s.kda[l];
    k.conv_q.assign(C * K, 0.0f);
    k.conv_k.assign(C * K, 0.0f);
    k.conv_v.assign(C * K, 0.0f);
    k.S.assign(size_t(cfg.kda.heads) * D * D, 0.0f);
  }
  return s;
}

void Session::truncate_mla(int64_t new_length, const ModelConfig& cfg) {
  for (int l = 0; l < cfg.num_layers; ++l)
    if (cfg.attention[l] == AttentionKind::MLA)
      mla[l].truncate(size_t(new_length));
    else if (cfg.attention[l] == AttentionKind::GQA)
      kv[l].truncate(size_t(new_length));
}

uint64_t Session::bytes() const {
  uint64_t b = 0;
  for (auto& k : kda) b += 4 * (k.conv_q.size() + k.conv_k.size() + k.conv_v.size() + k.S.size());
  for (auto& m : mla) b += m.bytes();
  for (auto& c : kv) b += c.bytes();
  return b;
}

}  // namespace deltafin
