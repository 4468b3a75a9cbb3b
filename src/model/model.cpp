// forward(rows): the one primitive behind prefill, decode and verification.
// One block of T rows goes through the layers in order; each layer is
//   x = norm(residual_in(p))                 the attention's input
//   p = p + attention(x)                     KDA, MLA or GQA, state in the session
//   x = norm(residual_in(p))                 the FFN's input
//   p = p + ffn(x)                           a gated MLP or the MoE
// With a plain residual (Qwen3) residual_in(p) is p, the running sum. With
// Block AttnRes (K3) p is the current block's partial sum and residual_in is
// the depth mix of the finished blocks' sums (the anchors; a new block
// starts every attn_res_block layers) and p. The tail takes residual_in once
// more, norms and applies the LM head.
#include "model/model.h"

#include <algorithm>
#include <chrono>

#include "kernels/ops.h"
#include "kernels/vec.h"
#include "model/attnres.h"
#include "model/layers.h"
#include "model/matrix_ops.h"

namespace deltafin {

namespace {
using Clock = std::chrono::steady_clock;

// Adds the time from construction to destruction to a stats field.
class PhaseTimer {
 public:
  explicit PhaseTimer(double& into) : into_(into), t0_(Clock::now()) {}
  ~PhaseTimer() { into_ += std::chrono::duration<double>(Clock::now() - t0_).count(); }

 private:
  double& into_;
  Clock::time_point t0_;
};

std::vector<float> fold(const std::vector<float>& norm_w, const std::vector<float>& proj) {
  std::vector<float> c(norm_w.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = norm_w[i] * proj[i];
  return c;
}

// Rows of a block are mixed on all threads when there are enough of them.
constexpr size_t kParallelRows = 4;
}  // namespace

// The block's AttnRes anchors: per row, `count` finished-block sums and their
// keys, [T][max][H] each.
class Model::Anchors {
 public:
  Anchors(Workspace& ws, size_t T, size_t max, size_t H)
      : values_(ws.anchor_values.take(T * max * H)), keys_(ws.anchor_keys.take(T * max * H)), max_(max), H_(H) {}
  AnchorRow row(size_t t) const { return {values_ + t * max_ * H_, keys_ + t * max_ * H_, count_}; }
  size_t count() const { return count_; }
  // Row t's next anchor slot (value, key), filled before close_block().
  float* next_value(size_t t) { return values_ + (t * max_ + count_) * H_; }
  float* next_key(size_t t) { return keys_ + (t * max_ + count_) * H_; }
  void close_block() { ++count_; }

 private:
  float* values_;
  float* keys_;
  size_t max_, H_, count_ = 0;
};

// The next MoE layer's router input as far as it is known once this layer's
// shared experts have run: its depth mix and norm over the state plus their
// output (the routed experts and the layers in between are missing; the
// state changes little in one layer). Its top experts per row are read early.
class Model::Guesser : public layers::NextLayerGuesser {
 public:
  Guesser(Model& m, const Anchors& anchors, const float* p, int next, int64_t pos0)
      : m_(m), anchors_(anchors), p_(p), next_(next), pos0_(pos0) {}
  void guess(const float* shared, size_t T) override {
    const ModelConfig& c = m_.cfg_;
    const size_t H = c.hidden, E = c.moe.num_experts;
    const LayerWeights& N = m_.w_.layers[size_t(next_)];
    Workspace& ws = *m_.ws_;
    ThreadScratch& ts = ws.threads[0];
    float* gx = ws.guess_in.take(2 * T * H);
    float* state = gx + T * H;
    for (size_t t = 0; t < T; ++t) {
      const float* pt = p_ + t * H;
      for (size_t d = 0; d < H; ++d) state[d] = pt[d] + shared[t * H + d];
      depth_mix(anchors_.row(t), state, m_.c_mlp_[size_t(next_)].data(), H, c.rms_eps, ts.key.take(H),
                ts.mix.take(H));
      ops::rms_norm(ts.mix.take(H), N.post_attention_norm.data(), H, c.rms_eps, gx + t * H);
    }
    float* logits = ws.guess_logits.take(T * E);
    ops::matmul(N.router, gx, T, logits, m_.pool_.get());
    // With a learned count every rank up to its cap is ranked (and scored
    // once the layer has run), however few are read.
    GuessDepth* depth = m_.guess_depth_.get();
    const int cap = std::min({depth ? depth->max_per_row() : m_.prefetch_per_row_, int(E), 64});
    const int per_row = depth ? std::min(depth->per_row(next_), cap) : cap;
    Model::PendingGuess* pending = depth ? &m_.pending_guess_[size_t(next_)] : nullptr;
    if (pending) {
      pending->first_position = pos0_;
      pending->rows = T;
      pending->ranks = cap;
      pending->ranked.resize(T * size_t(cap));
    }
    int picks[64];
    float unused[64];
    auto& guess = ws.guess_ids;
    guess.clear();
    for (size_t t = 0; t < T; ++t) {
      layers::route(logits + t * E, N.correction_bias.data(), int(E), cap, picks, unused, ts);
      if (pending) std::copy(picks, picks + cap, pending->ranked.begin() + std::ptrdiff_t(t * size_t(cap)));
      for (int i = 0; i < per_row; ++i)
        if (std::find(guess.begin(), guess.end(), picks[i]) == guess.end()) guess.push_back(picks[i]);
    }
    m_.guess_stats_.rows += T;
    m_.guess_stats_.per_row_sum += uint64_t(per_row) * T;
    if (m_.guess_observer_) m_.guess_observer_(pos0_, next_, T, guess);
    m_.experts_->prefetch(next_, guess);
  }

 private:
  Model& m_;
  const Anchors& anchors_;
  const float* p_;
  int next_;
  int64_t pos0_;
};

Model::Model() = default;
Model::~Model() = default;

void Model::set_prefetch(int per_row) {
  prefetch_per_row_ = per_row;
  guess_depth_.reset();
}

void Model::set_prefetch_auto(int max_per_row, double min_precision) {
  const int cap = std::min(max_per_row, 64);
  prefetch_per_row_ = cap;
  guess_depth_ =
      cap > 0 ? std::make_unique<GuessDepth>(cfg_.num_layers, cap, min_precision, std::min(cap, 4)) : nullptr;
  pending_guess_.assign(size_t(cfg_.num_layers), PendingGuess{});
}

// The guess made for this block of MoE layer `layer` (if any) against its routes.
void Model::score_guess(int layer, int64_t first_position, size_t T) {
  if (!guess_depth_) return;
  PendingGuess& g = pending_guess_[size_t(layer)];
  if (g.rows == T && g.first_position == first_position) {
    const size_t K = size_t(cfg_.moe.top_k), R = size_t(g.ranks);
    const auto& ids = ws_->route_ids;
    for (size_t t = 0; t < T; ++t)
      guess_depth_->score(layer, std::span<const int>(g.ranked.data() + t * R, R),
                          std::span<const int>(ids.data() + t * K, K));
  }
  g.rows = 0;
}

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
  if (c.residual == ResidualKind::AttnRes && (c.num_layers + c.attn_res_block - 1) / c.attn_res_block + 1 > int(kMaxAnchors))
    return error("config.json: too many AttnRes blocks ({} layers / block size {}; at most {} anchors)", c.num_layers,
                 c.attn_res_block, kMaxAnchors);
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
  m->ws_ = std::make_unique<Workspace>();
  m->ws_->threads.resize(size_t(m->pool_->size()));
  m->kda_records_.resize(size_t(c.num_layers));
  return m;
}

// Embedding: BF16 rows widened exactly.
void Model::embed(std::span<const int32_t> tokens, float* p) const {
  const size_t H = cfg_.hidden;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const uint16_t* e = w_.embed.bf16() + size_t(tokens[t]) * H;
    for (size_t d = 0; d < H; ++d) p[t * H + d] = bf16_to_f32(e[d]);
  }
}

// The attention's input: the depth mix of the anchors and p (p alone before
// the first anchor), normed. At a block boundary p becomes an anchor and the
// new block's partial sum starts empty.
void Model::attention_input(int l, Anchors& anchors, float* p, float* x, size_t T) {
  const size_t H = cfg_.hidden;
  const LayerWeights& L = w_.layers[size_t(l)];
  const bool boundary = l % cfg_.attn_res_block == 0;
  const size_t P = T >= kParallelRows ? size_t(pool_->size()) : 1;
  auto rows = [&](size_t t0, size_t t1, ThreadScratch& ts) {
    float* mix = ts.mix.take(H);
    float* key = ts.key.take(H);
    for (size_t t = t0; t < t1; ++t) {
      float* pt = p + t * H;
      if (anchors.count() == 0)
        std::copy(pt, pt + H, mix);
      else
        depth_mix(anchors.row(t), pt, c_attn_[size_t(l)].data(), H, cfg_.rms_eps, key, mix);
      if (boundary) {
        float* v = anchors.next_value(t);
        std::copy(pt, pt + H, v);
        ops::rms_norm(v, nullptr, H, cfg_.rms_eps, anchors.next_key(t));
        std::fill(pt, pt + H, 0.0f);
      }
      ops::rms_norm(mix, L.input_norm.data(), H, cfg_.rms_eps, x + t * H);
    }
  };
  if (P == 1) {
    rows(0, T, ws_->threads[0]);
  } else {
    pool_->parallel_for(P, 1, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) {
        const auto [t0, t1] = layers::share(T, i, P);
        rows(t0, t1, ws_->threads[i]);
      }
    });
  }
  if (boundary) anchors.close_block();
}

// Plain residual: x = norm(p) per row, with the layer's norm weights `w`.
void Model::plain_input(const std::vector<float>& w, const float* p, float* x, size_t T) {
  const size_t H = cfg_.hidden;
  auto rows = [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) ops::rms_norm(p + t * H, w.data(), H, cfg_.rms_eps, x + t * H);
  };
  if (T >= kParallelRows)
    pool_->parallel_for(T, 1, rows);
  else
    rows(0, T);
}

// p = p + attention output; the FFN's input is the depth mix of the anchors
// and p, normed.
void Model::ffn_input(int l, const Anchors& anchors, float* p, const float* o, float* x, size_t T) {
  const size_t H = cfg_.hidden;
  const LayerWeights& L = w_.layers[size_t(l)];
  const size_t P = T >= kParallelRows ? size_t(pool_->size()) : 1;
  auto rows = [&](size_t t0, size_t t1, ThreadScratch& ts) {
    float* mix = ts.mix.take(H);
    float* key = ts.key.take(H);
    for (size_t t = t0; t < t1; ++t) {
      float* pt = p + t * H;
      kernels::add(o + t * H, pt, H);
      depth_mix(anchors.row(t), pt, c_mlp_[size_t(l)].data(), H, cfg_.rms_eps, key, mix);
      ops::rms_norm(mix, L.post_attention_norm.data(), H, cfg_.rms_eps, x + t * H);
    }
  };
  if (P == 1) {
    rows(0, T, ws_->threads[0]);
  } else {
    pool_->parallel_for(P, 1, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) {
        const auto [t0, t1] = layers::share(T, i, P);
        rows(t0, t1, ws_->threads[i]);
      }
    });
  }
}

// Rows [first, T): final depth mix (AttnRes), norm, LM head.
void Model::logits_of(const Anchors& anchors, const float* p, size_t first, size_t T, std::vector<float>& logits) {
  const size_t H = cfg_.hidden, n = T - first;
  float* x = ws_->block_in.take(n * H);
  ThreadScratch& ts = ws_->threads[0];
  for (size_t t = first; t < T; ++t) {
    if (cfg_.residual == ResidualKind::Plain) {
      ops::rms_norm(p + t * H, w_.final_norm.data(), H, cfg_.rms_eps, x + (t - first) * H);
      continue;
    }
    depth_mix(anchors.row(t), p + t * H, c_out_.data(), H, cfg_.rms_eps, ts.key.take(H), ts.mix.take(H));
    ops::rms_norm(ts.mix.take(H), w_.final_norm.data(), H, cfg_.rms_eps, x + (t - first) * H);
  }
  logits.resize(n * size_t(cfg_.vocab));
  ops::matmul(w_.lm_head, x, n, logits.data(), pool_.get());
}

Status Model::forward(std::span<const int32_t> tokens, Session& session, Logits which, std::vector<float>* logits,
                      ForwardStats* stats) {
  return run_block(tokens, session, which, logits, stats, false);
}

Status Model::verify(std::span<const int32_t> tokens, Session& session, std::vector<float>* logits,
                     ForwardStats* stats) {
  DF_TRY(run_block(tokens, session, Logits::AllRows, logits, stats, true));
  verified_session_ = &session;
  verified_rows_ = tokens.size();
  return {};
}

Status Model::commit_verified(Session& session, size_t n) {
  if (verified_session_ != &session) return error("commit_verified: no verification block pending on this session");
  if (n > verified_rows_) return error("commit_verified: {} rows asked, the block has {}", n, verified_rows_);
  verified_session_ = nullptr;
  ThreadPool* pool = pool_.get();
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerWeights& L = w_.layers[size_t(l)];
    if (L.attention == AttentionKind::KDA)
      layers::kda_commit(cfg_, L, session.kda[size_t(l)], kda_records_[size_t(l)], n, *ws_, pool);
    else if (L.attention == AttentionKind::MLA)
      session.mla[size_t(l)].truncate(size_t(session.length) + n);
    else
      session.kv[size_t(l)].truncate(size_t(session.length) + n);
  }
  session.length += int64_t(n);
  return {};
}

Status Model::set_capture_layers(std::vector<int> layers) {
  std::vector<int> slot(size_t(cfg_.num_layers), -1);
  for (size_t i = 0; i < layers.size(); ++i) {
    const int l = layers[i];
    if (l < 0 || l >= cfg_.num_layers) return error("capture: layer {} is outside 0..{}", l, cfg_.num_layers - 1);
    if (slot[size_t(l)] >= 0) return error("capture: layer {} is listed twice", l);
    slot[size_t(l)] = int(i);
  }
  capture_layers_ = std::move(layers);
  capture_slot_ = capture_layers_.empty() ? std::vector<int>{} : std::move(slot);
  captured_.clear();
  return {};
}

uint64_t Model::verify_bytes_per_row() const {
  const uint64_t per_layer = 4 * (4 * uint64_t(cfg_.kda.channels()) + uint64_t(cfg_.kda.heads));
  return per_layer * uint64_t(cfg_.num_kda_layers());
}

Status Model::run_block(std::span<const int32_t> tokens, Session& session, Logits which, std::vector<float>* logits,
                        ForwardStats* stats, bool verify) {
  const size_t T = tokens.size(), H = cfg_.hidden;
  if (T == 0) return error("forward: no rows");
  if (verified_session_ == &session)
    return error("forward: a verification block is pending on this session (commit_verified first)");
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const AttentionKind a = cfg_.attention[size_t(l)];
    const size_t cached = a == AttentionKind::MLA   ? session.mla[size_t(l)].length()
                          : a == AttentionKind::GQA ? session.kv[size_t(l)].length()
                                                    : size_t(session.length);
    if (cached != size_t(session.length))
      return error("forward: session length {} but layer {}'s cache holds {} positions", session.length, l, cached);
  }
  for (int32_t id : tokens)
    if (id < 0 || id >= cfg_.vocab) return error("token id {} is outside the vocabulary (0..{})", id, cfg_.vocab - 1);
  Workspace& ws = *ws_;
  ThreadPool* pool = pool_.get();
  ForwardStats local;
  ForwardStats& st = stats ? *stats : local;
  const bool attn_res = cfg_.residual == ResidualKind::AttnRes;
  const size_t max_anchors =
      attn_res ? size_t(cfg_.num_layers + cfg_.attn_res_block - 1) / size_t(cfg_.attn_res_block) + 1 : 0;
  float* p = ws.partial.take(T * H);     // the current block's partial sum
  float* x = ws.block_in.take(T * H);    // the next block's normed input
  float* o = ws.attn_out.take(T * H);
  float* f = ws.ffn_out.take(T * H);
  Anchors anchors(ws, T, max_anchors, H);

  embed(tokens, p);
  const size_t NC = capture_layers_.size();
  if (NC) captured_.resize(T * NC * H);
  for (int l = 0; l < cfg_.num_layers; ++l) {
    // A server that lost its client stops here, within one layer of the block.
    if (cancel_ && cancel_->load(std::memory_order_relaxed)) return Status::cancelled();
    const LayerWeights& L = w_.layers[size_t(l)];
    if (attn_res)
      attention_input(l, anchors, p, x, T);
    else
      plain_input(L.input_norm, p, x, T);
    if (L.attention == AttentionKind::KDA) {
      PhaseTimer timer(st.seconds_kda);
      layers::kda(cfg_, L, session.kda[size_t(l)], x, T, o, ws, pool, verify ? &kda_records_[size_t(l)] : nullptr);
    } else if (L.attention == AttentionKind::MLA) {
      PhaseTimer timer(st.seconds_mla);
      layers::mla(cfg_, L, session.mla[size_t(l)], x, T, o, ws, pool);
    } else {
      PhaseTimer timer(st.seconds_mla);  // attention over a cache, as MLA's
      layers::gqa(cfg_, L, session.kv[size_t(l)], x, T, o, ws, pool);
    }
    if (attn_res) {
      ffn_input(l, anchors, p, o, x, T);
    } else {
      kernels::add(o, p, T * H);
      plain_input(L.post_attention_norm, p, x, T);
    }
    if (L.ffn == FfnKind::Dense) {
      PhaseTimer timer(st.seconds_dense);
      layers::gated_mlp(cfg_, L.gate_proj, L.up_proj, L.down_proj, x, T, f, ws, pool);
    } else {
      PhaseTimer timer(st.seconds_moe);
      const int nl = next_moe_[size_t(l)];
      Guesser guesser(*this, anchors, p, nl, session.length);
      // The guess needs the next layer's depth mix: AttnRes models only.
      const bool guess = attn_res && nl >= 0 && prefetch_per_row_ > 0 && T <= layers::kPrefetchMaxRows;
      layers::MoeStats ms;
      DF_TRY(layers::moe(cfg_, L, l, *experts_, x, T, f, ws, pool, &ms, route_observer_, session.length,
                         guess ? &guesser : nullptr));
      st.seconds_expert_wait += ms.seconds_acquire;
      st.seconds_expert_products += ms.seconds_products;
      st.seconds_shared += ms.seconds_shared;
      st.expert_bytes += ms.bytes;
      st.experts_used += ms.experts;
      score_guess(l, session.length, T);
    }
    kernels::add(f, p, T * H);
    if (NC && capture_slot_[size_t(l)] >= 0)
      for (size_t t = 0; t < T; ++t)
        std::copy(p + t * H, p + (t + 1) * H, captured_.data() + (t * NC + size_t(capture_slot_[size_t(l)])) * H);
  }
  if (!verify) session.length += int64_t(T);  // a verified block commits later
  st.rows += T;

  if (which != Logits::None && logits) {
    PhaseTimer timer(st.seconds_head);
    logits_of(anchors, p, which == Logits::LastRow ? T - 1 : 0, T, *logits);
  }
  return {};
}

}  // namespace deltafin
