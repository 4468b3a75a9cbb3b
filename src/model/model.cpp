// forward(rows): the one primitive behind prefill, decode and verification.
#include "model/model.h"

#include <chrono>

#include "model/attnres.h"
#include "model/layer_ops.h"
#include "model/layers.h"

namespace deltafin {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<float> fold(const std::vector<float>& norm_w, const std::vector<float>& proj) {
  std::vector<float> c(norm_w.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = norm_w[i] * proj[i];
  return c;
}
}  // namespace

struct Model::Buffers {
  std::vector<float> p, x, o, f, mix, key, guess;
  std::vector<float> anchor_values, anchor_keys;  // [T][max_anchors][H]
  std::vector<const float*> vals, keys;           // one row's anchors
  layers::Scratch scratch;
};

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::open(const std::string& dir, int threads) {
  DF_ASSIGN(auto ck, Checkpoint::open(dir));
  DF_ASSIGN(ModelConfig cfg, ModelConfig::from_json(ck->config()));
  DF_ASSIGN(auto src, CheckpointExpertSource::create(*ck, cfg));
  std::unique_ptr<ExpertSource> experts = std::move(src);
  return open_with(std::move(ck), std::move(experts), threads);
}

Result<std::unique_ptr<Model>> Model::open_with(std::unique_ptr<Checkpoint> ck, std::unique_ptr<ExpertSource> experts,
                                                int threads) {
  auto m = std::unique_ptr<Model>(new Model());
  DF_ASSIGN(m->cfg_, ModelConfig::from_json(ck->config()));
  const auto& c = m->cfg_;
  if ((c.num_layers + c.attn_res_block - 1) / c.attn_res_block + 1 > 63)
    return error("config.json: too many AttnRes blocks ({} layers / block size {})", c.num_layers, c.attn_res_block);
  DF_ASSIGN(m->w_, ModelWeights::bind(*ck, c));
  m->ck_ = std::move(ck);
  m->experts_ = std::move(experts);
  m->pool_ = std::make_unique<ThreadPool>(threads);
  for (const auto& L : m->w_.layers) {
    m->c_attn_.push_back(fold(L.attn_res_norm, L.attn_res_proj));
    m->c_mlp_.push_back(fold(L.mlp_res_norm, L.mlp_res_proj));
  }
  m->c_out_ = fold(m->w_.out_res_norm, m->w_.out_res_proj);
  m->next_moe_.assign(size_t(c.num_layers), -1);
  for (int l = c.num_layers - 2; l >= 0; --l)
    m->next_moe_[l] = c.ffn[l + 1] == FfnKind::MoE ? l + 1 : m->next_moe_[l + 1];
  m->buf_ = std::make_unique<Buffers>();
  return m;
}

Status Model::forward(std::span<const int32_t> tokens, Session& session, Logits which, std::vector<float>* logits,
                      ForwardStats* stats) {
  const size_t T = tokens.size(), H = cfg_.hidden;
  if (T == 0) return error("forward: no rows");
  for (int32_t id : tokens)
    if (id < 0 || id >= cfg_.vocab) return error("token id {} is outside the vocabulary (0..{})", id, cfg_.vocab - 1);
  const size_t max_anchors = size_t(cfg_.num_layers + cfg_.attn_res_block - 1) / cfg_.attn_res_block + 1;
  Buffers& b = *buf_;
  using layers::Scratch;
  float* p = Scratch::take(b.p, T * H);
  float* x = Scratch::take(b.x, T * H);
  float* o = Scratch::take(b.o, T * H);
  float* f = Scratch::take(b.f, T * H);
  float* mix = Scratch::take(b.mix, H);
  float* key = Scratch::take(b.key, H);
  float* av = Scratch::take(b.anchor_values, T * max_anchors * H);
  float* ak = Scratch::take(b.anchor_keys, T * max_anchors * H);
  size_t n_anchors = 0;
  std::vector<const float*>& vals = b.vals;
  std::vector<const float*>& keys = b.keys;
  auto row_anchors = [&](size_t t) {
    vals.clear();
    keys.clear();
    for (size_t i = 0; i < n_anchors; ++i) {
      vals.push_back(av + (t * max_anchors + i) * H);
      keys.push_back(ak + (t * max_anchors + i) * H);
    }
  };

  // Embedding: BF16 rows widened exactly.
  for (size_t t = 0; t < T; ++t) {
    const uint16_t* e = w_.embed.bf16() + size_t(tokens[t]) * H;
    for (size_t d = 0; d < H; ++d) p[t * H + d] = bf16_to_f32(e[d]);
  }

  ForwardStats local;
  ForwardStats& st = stats ? *stats : local;
  ThreadPool* pool = pool_.get();
  for (int l = 0; l < cfg_.num_layers; ++l) {
    if (cancel_ && cancel_->load(std::memory_order_relaxed)) return Status::cancelled();
    const LayerWeights& L = w_.layers[l];
    const bool boundary = l % cfg_.attn_res_block == 0;
    // Attention input, and the block boundary bookkeeping.
    for (size_t t = 0; t < T; ++t) {
      float* pt = p + t * H;
      float* xt = x + t * H;
      if (n_anchors == 0) {
        std::copy(pt, pt + H, mix);
      } else {
        row_anchors(t);
        depth_mix(vals, keys, pt, c_attn_[l].data(), H, cfg_.rms_eps, key, mix);
      }
      if (boundary) {
        float* v = av + (t * max_anchors + n_anchors) * H;
        std::copy(pt, pt + H, v);
        ops::rms_norm(v, nullptr, H, cfg_.rms_eps, ak + (t * max_anchors + n_anchors) * H);
        std::fill(pt, pt + H, 0.0f);  // the new block's partial sum starts empty
      }
      ops::rms_norm(mix, L.input_norm.data(), H, cfg_.rms_eps, xt);
    }
    if (boundary) ++n_anchors;

    auto t0 = Clock::now();
    if (L.attention == AttentionKind::KDA) {
      layers::kda(cfg_, L, session.kda[l], x, T, o, b.scratch, pool);
      st.seconds_kda += since(t0);
    } else {
      layers::mla(cfg_, L, session.mla[l], session.length, x, T, o, b.scratch, pool);
      st.seconds_mla += since(t0);
    }

    // p_mid = base + o; FFN input mixes the anchors with p_mid.
    for (size_t t = 0; t < T; ++t) {
      float* pt = p + t * H;
      const float* ot = o + t * H;
      for (size_t d = 0; d < H; ++d) pt[d] = pt[d] + ot[d];
      row_anchors(t);
      depth_mix(vals, keys, pt, c_mlp_[l].data(), H, cfg_.rms_eps, key, mix);
      ops::rms_norm(mix, L.post_attention_norm.data(), H, cfg_.rms_eps, x + t * H);
    }

    t0 = Clock::now();
    if (L.ffn == FfnKind::Dense) {
      layers::dense_ffn(cfg_, L, x, T, f, b.scratch, pool);
      st.seconds_dense += since(t0);
    } else {
      layers::MoeStats ms;
      const int nl = next_moe_[l];
      const bool guess = nl >= 0 && prefetch_per_row_ > 0 && T <= layers::kPrefetchMaxRows;
      // The next MoE layer's router input, as far as it is known once the
      // shared experts have run: its depth mix and norm over the state plus
      // their output (the routed experts and the layers in between missing).
      auto input = [&](const float* shared) -> const float* {
        float* gx = Scratch::take(b.guess, 2 * T * H);
        float* st = gx + T * H;
        for (size_t t = 0; t < T; ++t) {
          const float* pt = p + t * H;
          for (size_t d = 0; d < H; ++d) st[d] = pt[d] + shared[t * H + d];
          row_anchors(t);
          depth_mix(vals, keys, st, c_mlp_[nl].data(), H, cfg_.rms_eps, key, mix);
          ops::rms_norm(mix, w_.layers[nl].post_attention_norm.data(), H, cfg_.rms_eps, gx + t * H);
        }
        return gx;
      };
      layers::NextLayerGuess next{guess ? &w_.layers[nl] : nullptr, nl, prefetch_per_row_};
      if (guess) {
        next.input = [](void* ctx, const float* shared) { return (*static_cast<decltype(input)*>(ctx))(shared); };
        next.ctx = &input;
      }
      DF_TRY(layers::moe_ffn(cfg_, L, l, *experts_, x, T, f, b.scratch, pool, &ms, route_observer_, session.length,
                             next));
      st.seconds_moe += since(t0);
      st.seconds_expert_wait += ms.seconds_acquire;
      st.expert_bytes += ms.bytes;
      st.experts_used += ms.experts;
    }
    for (size_t i = 0; i < T * H; ++i) p[i] = p[i] + f[i];
  }
  session.length += int64_t(T);
  st.rows += T;

  // Tail: final depth mix, norm, lm_head for the rows asked for.
  if (which != Logits::None && logits) {
    auto t0 = Clock::now();
    const size_t first = which == Logits::LastRow ? T - 1 : 0, n = T - first;
    for (size_t t = first; t < T; ++t) {
      row_anchors(t);
      depth_mix(vals, keys, p + t * H, c_out_.data(), H, cfg_.rms_eps, key, mix);
      ops::rms_norm(mix, w_.final_norm.data(), H, cfg_.rms_eps, x + (t - first) * H);
    }
    logits->resize(n * size_t(cfg_.vocab));
    ops::matmul(w_.lm_head, x, n, logits->data(), pool);
    st.seconds_head += since(t0);
  }
  return {};
}

}  // namespace deltafin
