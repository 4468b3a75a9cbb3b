#include "store/store_source.h"

#include <cstring>
#include <filesystem>

#include "store/heat_file.h"
#include "store/manifest_check.h"

namespace deltafin {

namespace fs = std::filesystem;

Result<std::unique_ptr<StoreExpertSource>> StoreExpertSource::open(const Manifest& m, const ModelConfig& cfg,
                                                                   const StoreReadOptions& opts,
                                                                   std::vector<std::string>* warnings) {
  DF_TRY(check_manifest_model(m, cfg, "the spine's config.json"));
  auto s = std::unique_ptr<StoreExpertSource>(new StoreExpertSource());
  s->man_ = m;
  s->cfg_ = cfg;
  // Record offsets inside a span (model/expert_layout.h).
  s->layout_ = expert_layout(cfg);
  if (s->layout_.total != m.expert_bytes)
    return error("manifest: expert_bytes {} != {} from the config", m.expert_bytes, s->layout_.total);

  std::vector<io::DriveSpec> specs;
  for (const auto& d : m.drives) specs.push_back({d.root, d.rate_mb_s});
  DF_ASSIGN(s->engine_, io::ReadEngine::create(specs, opts.engine));
  std::vector<std::vector<std::string>> why(m.drives.size());
  s->file_ids_.resize(m.drives.size());
  for (size_t d = 0; d < m.drives.size(); ++d) {
    const std::string dir = m.pack_dir(int(d));
    const bool root_ok = fs::is_directory(m.drives[d].root);
    if (!root_ok) {
      s->engine_->disable_drive(int(d));
      if (warnings) warnings->push_back(fmt::format("drive {} ({}): root is missing; reading its experts from replicas", d, m.drives[d].root));
    }
    for (const auto& p : m.drives[d].packs) {
      const std::string path = (fs::path(dir) / p.name).string();
      if (!root_ok) {
        s->file_ids_[d].push_back(-1);
        why[d].push_back(fmt::format("drive {} ({}) file {}: drive root is missing", d, m.drives[d].root, path));
        continue;
      }
      auto id = s->engine_->add_file(int(d), path, p.size);
      s->file_ids_[d].push_back(id.ok() ? *id : -1);
      why[d].push_back(id.ok() ? "" : id.message());
      if (!id.ok() && warnings) warnings->push_back(id.message());
    }
  }
  // Every expert needs at least one readable copy, or we refuse before generation.
  for (size_t mi = 0; mi < m.moe_layers.size(); ++mi)
    for (int e = 0; e < m.num_experts; ++e) {
      const ExpertEntry& x = m.experts[mi * m.num_experts + e];
      bool any = false;
      for (const auto& p : x.at) any = any || s->file_ids_[p.drive][p.file] >= 0;
      if (!any) {
        const auto& p = x.at[0];
        return error("layer {} expert {}: no readable copy: {}", m.moe_layers[mi], e, why[p.drive][p.file]);
      }
    }
  if (m.stream) {
    if (opts.store_dir.empty())
      return error("a streamed store (setup --stream) needs its directory (StoreReadOptions::store_dir)");
    DF_ASSIGN(s->fetched_, FetchedLog::open(opts.store_dir, int(m.moe_layers.size()), m.num_experts));
    s->remote_ = opts.remote;
  }
  const size_t slots = arena_slots(m, opts.arena_bytes);
  // Prefetch may use at most half the slots: the rest stay for demand.
  s->arena_ = std::make_unique<io::AlignedArena>(m.span_bytes, slots, slots / 2);
  s->uses_.assign(m.moe_layers.size() * size_t(m.num_experts), 0);
  if (opts.ram_tier_bytes > 0) {
    DF_ASSIGN(s->tier_, RamTier::create(opts.ram_tier_bytes, m.span_bytes, m.moe_layers.size() * size_t(m.num_experts),
                                        opts.ram_tier_age_every, m.moe_layers.size() * size_t(std::max(0, cfg.moe.top_k))));
    s->stats_.ram_slots = s->tier_->slots();
    s->adopt_ = s->tier_->span_bytes() == s->arena_->slot_bytes();
    if (opts.tier_seed && opts.tier_seed->counts.size() == s->uses_.size())
      for (size_t k = 0; k < s->uses_.size(); ++k) s->tier_->policy().seed(int(k), opts.tier_seed->per_run(k));
  }
  return s;
}

StoreExpertSource::~StoreExpertSource() {
  if (!engine_) return;
  settle();
  drop_unclaimed();
  reap_dropped(true);
}

void StoreExpertSource::drop_unclaimed() {
  for (auto& sp : spec_)
    if (sp.slot) {
      engine_->cancel(sp.handle);
      dropped_.push_back(std::move(sp));
    }
  spec_.clear();
}

void StoreExpertSource::reap_dropped(bool block) {
  size_t kept = 0;
  for (auto& sp : dropped_) {
    if (block || engine_->finished(sp.handle)) {
      (void)engine_->wait(sp.handle);  // cancelled: returns once the engine let go of the slot
      arena_->release(sp.slot);
    } else {
      dropped_[kept++] = std::move(sp);
    }
  }
  dropped_.resize(kept);
}

void StoreExpertSource::prefetch(int layer, std::span<const int> experts) {
  std::vector<io::ReadRequest> reqs;
  std::vector<Speculative> issued;
  const int mi = man_.moe_index(layer);
  for (int e : experts) {
    bool have = false;
    for (const auto& sp : spec_) have = have || (sp.layer == layer && sp.expert == e);
    for (const auto& sp : issued) have = have || sp.expert == e;
    if (have) continue;
    if (!local(mi, e)) continue;  // a guess never fetches: only what is routed is fetched
    auto req = request(layer, e);
    if (!req.ok()) continue;  // a hint only: begin() reports a bad expert
    const int key = mi * man_.num_experts + e;
    if (tier_ && tier_->resident(key)) continue;  // a resident guess costs nothing
    // Into the arena, never a tier slot: a wrong guess must not push out what
    // the tier keeps, and a right one is admitted when begin() asks for it.
    uint8_t* slot = arena_->try_take(io::Purpose::Prefetch);
    if (!slot) break;  // over prefetch's share of the arena
    req->dest = slot;
    req->purpose = io::Purpose::Prefetch;
    reqs.push_back(std::move(*req));
    issued.push_back({layer, e, slot, nullptr});
  }
  if (reqs.empty()) return;
  auto handles = engine_->submit_batch(std::move(reqs));
  for (size_t i = 0; i < issued.size(); ++i) issued[i].handle = std::move(handles[i]);
  spec_.insert(spec_.end(), issued.begin(), issued.end());
  std::lock_guard<std::mutex> lock(mu_);
  stats_.prefetch_issued += issued.size();
}

std::vector<std::string> StoreExpertSource::drive_files(int drive) const {
  std::vector<std::string> out;
  for (size_t f = 0; f < man_.drives[drive].packs.size(); ++f)
    if (file_ids_[drive][f] >= 0) out.push_back(man_.pack_path(drive, f));
  return out;
}

bool StoreExpertSource::local(int mi, int e) const {
  if (mi < 0 || mi >= int(man_.moe_layers.size()) || e < 0 || e >= man_.num_experts) return false;
  if (man_.experts[size_t(mi) * man_.num_experts + e].has_sum) return true;
  return fetched_ && fetched_->lookup(mi, e).has_value();
}

Status StoreExpertSource::fetch_missing(int layer, std::span<const int> experts) {
  const int mi = man_.moe_index(layer);
  if (!fetched_ || mi < 0) return {};
  std::vector<int> missing;
  for (int e : experts)
    if (!local(mi, e) && e >= 0 && e < man_.num_experts && std::find(missing.begin(), missing.end(), e) == missing.end())
      missing.push_back(e);
  if (missing.empty()) return {};
  DF_TRY(fetched_->refresh());  // another process (setup --resume) may have fetched them
  std::erase_if(missing, [&](int e) { return local(mi, e); });
  if (missing.empty()) return {};
  if (!remote_)
    return error("layer {} expert {}: not local yet in this streamed store, and no source to fetch it from ({} of {} "
                 "experts are local; `deltafin setup --resume --out STORE` completes the store)",
                 layer, missing[0], fetched_->local_count(), man_.experts.size());
  const auto t0 = std::chrono::steady_clock::now();
  DF_TRY(remote_->fetch(mi, missing, *fetched_));
  std::lock_guard<std::mutex> lock(mu_);
  stats_.streamed_experts += missing.size();
  stats_.streamed_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {};
}

Result<io::ReadRequest> StoreExpertSource::request(int layer, int e) const {
  const ExpertEntry* x = man_.expert(layer, e);
  if (!x) return error("expert {} of layer {} is not in the store", e, layer);
  Hash128 sum = x->xxh3;
  if (!x->has_sum) {
    auto h = fetched_ ? fetched_->lookup(man_.moe_index(layer), e) : std::nullopt;
    if (!h) return error("layer {} expert {}: not local yet in this streamed store", layer, e);
    sum = *h;
  }
  io::ReadRequest r;
  for (const auto& p : x->at) r.replicas.push_back({file_ids_[p.drive][p.file], p.offset});
  r.length = man_.expert_bytes;
  r.span = man_.span_bytes;
  r.has_checksum = true;
  r.checksum = sum;
  r.label = fmt::format("layer {} expert {}", layer, e);
  return r;
}

void StoreExpertSource::settle() {
  // (A begin() that failed part-way leaves empty handles and slots.)
  for (size_t i = 0; i < handles_.size(); ++i)
    if (!waited_[i] && handles_[i]) engine_->cancel(handles_[i]);
  for (size_t i = 0; i < handles_.size(); ++i)
    if (!waited_[i] && handles_[i]) (void)engine_->wait(handles_[i]);  // returns once the engine no longer writes the buffer
  for (size_t i = 0; i < held_.size(); ++i) {
    if (!held_[i]) continue;
    const Held h = held_as_[i];
    uint8_t* fill = h == Held::kTierFill ? held_[i] : h == Held::kArenaToTier ? reserved_slot_[i] : nullptr;
    if (h == Held::kArenaToTier && verified_[i] && adopt_) {
      // A claimed guess: its arena buffer (verified, read by this layer's
      // products) becomes the tier slot, and the slot's memory goes to the
      // arena. No copy; nothing reads either buffer any more.
      arena_->release(tier_->adopt(fill, held_[i]));
      fill = held_[i];
    } else if (h == Held::kArena || h == Held::kArenaToTier) {
      arena_->release(held_[i]);
    }
    if (fill && verified_[i]) tier_->publish(fill, keys_[i]);
    else if (fill) tier_->abandon(fill);  // failed, or never waited for: never enters
  }
  handles_.clear();
  waited_.clear();
  held_.clear();
  held_as_.clear();
  reserved_slot_.clear();
  verified_.clear();
  if (tier_) tier_->unpin_all();
  reap_dropped(false);
}

void StoreExpertSource::tier_snapshot() {
  if (!tier_) return;
  const RamTierStats& t = tier_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.ram_hits = t.hits, stats_.ram_misses = t.misses, stats_.ram_fills = t.fills;
  stats_.ram_bypassed = t.bypassed, stats_.ram_evictions = t.evictions, stats_.ram_adopted = t.adopted;
}

Status StoreExpertSource::begin(int layer, std::span<const int> experts, std::span<ExpertWeights> out) {
  settle();
  if (experts.size() > arena_->max_slots())
    return error("layer {}: a union of {} experts exceeds the read arena ({} buffers)", layer, experts.size(),
                 arena_->max_slots());
  // A streamed store fetches what is not local first (the tier holds only
  // experts that were local when read, so it is never asked for these).
  DF_TRY(fetch_missing(layer, experts));
  layer_ = layer;
  experts_.assign(experts.begin(), experts.end());
  out_ = out;
  ready_ = 0;
  begun_ = std::chrono::steady_clock::now();
  last_bytes_in_ = begun_;  // a prefetch that was in before begin() adds nothing
  // Speculative reads of this layer's experts become its demand reads (hits);
  // the others are cancelled. One batch for the rest, so the engine balances
  // the layer's reads over the drives.
  handles_.assign(experts.size(), nullptr);
  held_.assign(experts.size(), nullptr);
  waited_.assign(experts.size(), 0);
  held_as_.assign(experts.size(), Held::kArena);
  reserved_slot_.assign(experts.size(), nullptr);
  verified_.assign(experts.size(), 0);
  // Each request's index into uses_ and the tier (-1: not in the store; request() reports it).
  const int mi = man_.moe_index(layer);
  keys_.resize(experts.size());
  for (size_t i = 0; i < experts.size(); ++i)
    keys_[i] = mi >= 0 && experts[i] >= 0 && experts[i] < man_.num_experts ? mi * man_.num_experts + experts[i] : -1;
  uint64_t hits = 0;
  for (size_t i = 0; i < experts.size(); ++i) {
    if (keys_[i] >= 0) ++uses_[size_t(keys_[i])];
    if (tier_ && keys_[i] >= 0) {
      // Every request is looked up (and counted) before any slot is taken,
      // so this block's hits are pinned before a miss may evict anything.
      if (const uint8_t* p = tier_->lookup(keys_[i])) {
        held_[i] = const_cast<uint8_t*>(p);
        held_as_[i] = Held::kTierHit;
        continue;
      }
    }
    for (auto& sp : spec_)
      if (sp.slot && sp.layer == layer && sp.expert == experts[i]) {
        engine_->promote(sp.handle);
        handles_[i] = std::move(sp.handle);
        held_[i] = sp.slot;
        sp.slot = nullptr;
        ++hits;
        break;
      }
  }
  drop_unclaimed();
  std::vector<io::ReadRequest> reqs;
  std::vector<size_t> where;
  for (size_t i = 0; i < experts.size(); ++i) {
    if (held_[i] && held_as_[i] == Held::kArena && tier_ && keys_[i] >= 0) {
      // A claimed guess, read into the arena, is now a demand miss: the tier
      // admits it as it would any miss, and wait() copies its verified bytes
      // into the slot (the read is not repeated). When guesses took tier
      // slots by score instead, 16 guesses per row cut the hit rate from
      // 64.8% to 57.4% on the 2x model (docs/guide/drives-and-ram-tier.md).
      if ((reserved_slot_[i] = tier_->reserve(keys_[i]))) held_as_[i] = Held::kArenaToTier;
    }
    if (held_[i]) continue;
    auto req = request(layer, experts[i]);
    if (!req.ok()) return req.status();
    uint8_t* slot = tier_ ? tier_->reserve(keys_[i]) : nullptr;
    if (slot) held_as_[i] = Held::kTierFill;
    if (!slot) slot = arena_->try_take(io::Purpose::Demand);
    if (!slot) {
      reap_dropped(true);  // slots of cancelled prefetches come back once their reads are over
      slot = arena_->try_take(io::Purpose::Demand);
    }
    if (!slot) return error("layer {}: the read arena is exhausted", layer);
    held_[i] = slot;
    req->dest = slot;
    req->purpose = io::Purpose::Demand;
    reqs.push_back(std::move(*req));
    where.push_back(i);
  }
  auto handles = engine_->submit_batch(std::move(reqs));
  for (size_t k = 0; k < where.size(); ++k) handles_[where[k]] = std::move(handles[k]);
  if (hits) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prefetch_hits += hits;
  }
  tier_snapshot();
  return {};
}

bool StoreExpertSource::ready(size_t i) const {
  // Only wait(i) writes per-request state (waited_, verified_), never these.
  if (i >= handles_.size()) return false;
  return held_as_[i] == Held::kTierHit || (handles_[i] && engine_->landed(handles_[i]));
}

Status StoreExpertSource::wait(size_t i) {
  const bool hit = i < held_as_.size() && held_as_[i] == Held::kTierHit;
  if (i >= handles_.size() || (!handles_[i] && !hit)) return error("layer {}: expert slot {} was not requested", layer_, i);
  const uint8_t* base = held_[i];
  if (!hit) {  // a resident slot passed these checks when it was filled
    Status s = engine_->wait(handles_[i]);
    waited_[i] = 1;
    DF_TRY(s);
    DF_TRY(check_expert_payload(cfg_, layout_, base, layer_, experts_[i]));
    if (held_as_[i] == Held::kArenaToTier && !adopt_) {  // buffers of another size cannot trade places: copy
      std::memcpy(reserved_slot_[i], base, man_.expert_bytes);
      base = reserved_slot_[i];
    }
    verified_[i] = 1;  // only the waiting thread writes its own i; settle() reads it after every wait returned
  }
  out_[i] = expert_views(layout_, base);
  const auto bytes_in = hit ? begun_ : engine_->bytes_in_at(handles_[i]);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.experts_acquired++;
  stats_.bytes_touched += man_.expert_bytes;
  last_bytes_in_ = std::max(last_bytes_in_, bytes_in);
  if (++ready_ == handles_.size())
    stats_.read_seconds += std::chrono::duration<double>(last_bytes_in_ - begun_).count();
  return {};
}

ExpertSourceStats StoreExpertSource::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace deltafin
