#include "store/prepare.h"

#include "model/expert_layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <map>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "checkpoint/expert_generator.h"
#include "io/checksum.h"
#include "io/probe.h"
#include "model/config.h"
#include "model/weights.h"
#include "store/fs_util.h"
#include "store/expert_payloads.h"
#include "store/fetched_log.h"
#include "store/manifest.h"
#include "store/pack_writer.h"
#include "store/placement.h"
#include "store/progress.h"
#include "store/spine_pack.h"

namespace deltafin {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

Result<std::pair<std::string, double>> parse_drive_arg(const std::string& arg) {
  std::string dir = arg;
  double rate = 0;
  if (auto c = arg.rfind(':'); c != std::string::npos) {
    const std::string tail = arg.substr(c + 1);
    double v = 0;
    auto [p, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), v);
    if (ec == std::errc() && p == tail.data() + tail.size()) {
      if (!(v > 0)) return error("--drive {}: the rate must be a positive number of MB/s", arg);
      dir = arg.substr(0, c), rate = v;
    }
  }
  if (dir.empty()) return error("--drive '{}': no directory", arg);
  std::error_code ec;
  fs::path abs = fs::absolute(dir, ec).lexically_normal();
  std::string s = abs.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return std::make_pair(s, rate);
}

Status check_drive_roots(const std::vector<std::string>& roots) {
  for (const auto& r : roots) {
    std::error_code ec;
    const auto st = fs::status(r, ec);
    if (!fs::exists(st))
      return error("--drive {}: does not exist; create it (or mount the drive there) first: prepare never creates a "
                   "drive root, so a mistyped or unmounted drive cannot fill another file system",
                   r);
    if (!fs::is_directory(st)) return error("--drive {}: is not a directory", r);
  }
  return {};
}

Result<std::vector<std::pair<std::string, double>>> parse_drive_args(const std::vector<std::string>& args) {
  if (args.empty()) return error("give at least one --drive DIR");
  std::vector<std::pair<std::string, double>> out;
  std::vector<std::string> roots;
  for (const auto& d : args) {
    DF_ASSIGN(auto pr, parse_drive_arg(d));
    if (std::find(roots.begin(), roots.end(), pr.first) != roots.end()) return error("--drive {}: given twice", pr.first);
    roots.push_back(pr.first);
    out.push_back(pr);
  }
  DF_TRY(check_drive_roots(roots));
  return out;
}

namespace {

// The path with every existing part resolved (symlinks, "..").
fs::path resolved(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p).lexically_normal() : r;
}

// `inner` is `outer` or below it.
bool is_within(const fs::path& inner, const fs::path& outer) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

Status check_out_paths(const std::string& model_dir, const std::string& out_dir, const std::vector<std::string>& roots) {
  const fs::path model = resolved(model_dir), out = resolved(out_dir);
  if (is_within(out, model))
    return error("--out {}: is {} the source checkpoint {}; give a store directory outside it", out_dir,
                 out == model ? "the same directory as" : "inside", model.string());
  if (is_within(model, out / kSpineDirName))
    return error("--model {}: is inside {}, which prepare writes; give a store directory elsewhere", model_dir,
                 (out / kSpineDirName).string());
  for (const auto& r : roots)
    if (is_within(resolved(r), model))
      return error("--drive {}: is inside the source checkpoint {}; give a drive root outside it", r, model.string());
  return {};
}

// The keys of two option records that differ, with both values.
std::string option_differences(const json& before, const json& now) {
  std::string out;
  std::set<std::string> keys;
  for (auto& [k, v] : before.items()) keys.insert(k);
  for (auto& [k, v] : now.items()) keys.insert(k);
  for (const auto& k : keys) {
    const json a = before.contains(k) ? before[k] : json(), b = now.contains(k) ? now[k] : json();
    if (a != b) out += fmt::format("{}{}: {} before, {} now", out.empty() ? "" : "; ", k, a.dump(), b.dump());
  }
  return out;
}

// A streamed store's placements as a plan (setup --resume keeps them): the
// packs of each drive by name, their experts in offset order.
Result<PlacementPlan> plan_of_manifest(const Manifest& m, const std::vector<std::string>& roots, uint64_t span) {
  const size_t D = m.drives.size(), M = m.moe_layers.size(), E = size_t(m.num_experts);
  if (D != roots.size()) return error("the streamed store has {} drives, {} given", D, roots.size());
  for (size_t d = 0; d < D; ++d)
    if (m.drives[d].root != roots[d]) return error("drive {}: the streamed store has {}, {} given", d, m.drives[d].root, roots[d]);
  if (m.span_bytes != span) return error("the streamed store's spans are {} bytes, the checkpoint's {}", m.span_bytes, span);
  std::vector<std::vector<int>> layer_of(D);  // [drive][pack] -> MoE index
  for (size_t d = 0; d < D; ++d)
    for (const auto& p : m.drives[d].packs) {
      int mi = -1;
      for (size_t k = 0; k < M; ++k)
        if (p.name == fmt::format("layer-{:03d}.pack", m.moe_layers[k])) mi = int(k);
      if (mi < 0) return error("drive {}: pack {} is not named for an MoE layer", d, p.name);
      layer_of[d].push_back(mi);
    }
  PlacementPlan plan;
  plan.files.assign(D, std::vector<std::vector<int>>(M));
  plan.copies.assign(M * E, {});
  std::vector<std::vector<std::vector<std::pair<uint64_t, int>>>> at(D, std::vector<std::vector<std::pair<uint64_t, int>>>(M));
  for (size_t idx = 0; idx < M * E; ++idx)
    for (const Placement& pl : m.experts[idx].at) {
      const int mi = layer_of[size_t(pl.drive)][size_t(pl.file)];
      if (size_t(mi) != idx / E) return error("expert {} of MoE layer {} is placed in another layer's pack", idx % E, idx / E);
      at[size_t(pl.drive)][size_t(mi)].push_back({pl.offset, int(idx % E)});
      plan.copies[idx].push_back(pl.drive);
    }
  for (size_t d = 0; d < D; ++d)
    for (size_t mi = 0; mi < M; ++mi) {
      auto& v = at[d][mi];
      std::sort(v.begin(), v.end());
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].first != i * span) return error("drive {} MoE layer {}: spans are not back to back", d, mi);
        plan.files[d][mi].push_back(v[i].second);
      }
    }
  return plan;
}

}  // namespace

// Writing the store must not write into its own source.
Status check_prepare_paths(const PrepareOptions& o) {
  DF_ASSIGN(auto drive_args, parse_drive_args(o.drives));
  std::vector<std::string> roots;
  for (const auto& [root, rate] : drive_args) roots.push_back(root);
  return check_out_paths(o.model_dir, o.out_dir, roots);
}

namespace {

struct Unit {
  std::string done_dir;
  int pause_ms = 0;
  std::string record(const std::string& key) const { return (fs::path(done_dir) / (key + ".json")).string(); }
  Result<json> load(const std::string& key) const {
    auto t = read_file(record(key));
    if (!t.ok()) return t.status();
    try {
      return json::parse(*t);
    } catch (const std::exception&) {
      return error("{}: unreadable record", record(key));
    }
  }
  Status save(const std::string& key, const json& j) const {
    DF_TRY(write_file_atomic(record(key), j.dump() + "\n"));
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    return {};
  }
};

// Indices of the roots grouped by the file system (st_dev) they are on, in order of first appearance.
std::vector<std::vector<size_t>> roots_by_device(const std::vector<std::string>& roots) {
  std::vector<std::vector<size_t>> groups;
  std::vector<dev_t> devs;
  for (size_t d = 0; d < roots.size(); ++d) {
    struct stat st {};
    const bool ok = ::stat(roots[d].c_str(), &st) == 0;
    auto it = ok ? std::find(devs.begin(), devs.end(), st.st_dev) : devs.end();
    if (it == devs.end()) {
      devs.push_back(ok ? st.st_dev : dev_t(-1) - dev_t(d));  // unstat-able: a group of its own
      groups.push_back({d});
    } else {
      groups[size_t(it - devs.begin())].push_back(d);
    }
  }
  return groups;
}

uint64_t file_size_or_max(const std::string& path) {
  std::error_code ec;
  auto s = fs::file_size(path, ec);
  return ec ? UINT64_MAX : uint64_t(s);
}

// Source identity: sizes, mtimes and SHA-256 of every top-level regular file;
// hashes are reused from the record when size and mtime are unchanged.
Result<std::vector<SourceFile>> source_identity(const std::string& dir, const Unit& u, bool quiet,
                                                const std::map<std::string, std::string>& known) {
  std::vector<std::pair<std::string, std::pair<uint64_t, int64_t>>> files;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const uint64_t size = e.file_size();
    const int64_t mtime = int64_t(e.last_write_time().time_since_epoch().count());
    files.push_back({e.path().filename().string(), {size, mtime}});
    total += size;
  }
  if (ec) return error("{}: cannot list: {}", dir, ec.message());
  std::sort(files.begin(), files.end());
  auto rec = u.load("identity");
  if (rec.ok() && rec->is_array() && rec->size() == files.size()) {
    std::vector<SourceFile> out;
    for (size_t i = 0; i < files.size(); ++i) {
      const json& r = (*rec)[i];
      if (r.value("name", "") != files[i].first || r.value("size", uint64_t(0)) != files[i].second.first ||
          r.value("mtime", int64_t(0)) != files[i].second.second)
        break;
      out.push_back({files[i].first, files[i].second.first, r.value("sha256", "")});
    }
    if (out.size() == files.size()) return out;
  }
  uint64_t to_hash = 0;
  for (const auto& [name, sm] : files)
    if (!known.count(name)) to_hash += sm.first;
  Progress prog("hashing checkpoint (SHA-256)", to_hash, quiet || to_hash == 0);
  std::vector<SourceFile> out;
  json j = json::array();
  for (const auto& [name, sm] : files) {
    std::string sha;
    if (auto k = known.find(name); k != known.end()) {
      sha = k->second;
    } else {
      DF_ASSIGN(sha, sha256_file((fs::path(dir) / name).string(),
                                 [](uint64_t n, void* p) { static_cast<Progress*>(p)->add(n); }, &prog));
    }
    out.push_back({name, sm.first, sha});
    j.push_back({{"name", name}, {"size", sm.first}, {"mtime", sm.second}, {"sha256", sha}});
  }
  prog.finish();
  DF_TRY(u.save("identity", j));
  return out;
}

// One run of prepare, as the steps prepare_store takes in order. Each step
// reads what the ones before it set; a step that fails ends the run, and
// everything that can fail before output is written fails first.
class StorePreparation {
 public:
  explicit StorePreparation(const PrepareOptions& o)
      : o_(o), stream_(o.stream_mode == StreamMode::Stream), fill_(o.stream_mode == StreamMode::Fill) {}

  Status run() {
    DF_TRY(check_options());
    DF_TRY(validate_checkpoint());
    DF_ASSIGN(const bool complete, open_output());
    if (complete) return {};
    DF_TRY(check_options_record());
    DF_TRY(identify_source());
    DF_TRY(measure_drive_rates());
    DF_TRY(plan_work());
    DF_TRY(run_work());
    DF_TRY(write_spine_side_files());
    return write_manifest();
  }

 private:
  // A unit of work: one spine file, or the pack of (drive, MoE index).
  struct Work {
    int group = -1, drive = -1, m = -1;
    long key = 0;  // layer order
    std::string path, record;
    std::vector<std::string> shards;
  };

  // Everything the options can get wrong is checked before anything is
  // written, so a refused run leaves nothing behind (and no record that a
  // corrected rerun would call "different options").
  Status check_options() {
    auto format_or = spine_format_from_name(o_.spine);
    if (!format_or.ok()) return error("--spine '{}': expected bf16 or int8 (row-int8, lossy)", o_.spine);
    spine_format_ = *format_or;
    if (stream_ && (!o_.stream_source || !o_.shards))
      return error("a streamed store needs its source repository and shards (it is made by `deltafin setup --stream`)");
    DF_TRY(check_prepare_paths(o_));
    DF_ASSIGN(auto drive_args, parse_drive_args(o_.drives));
    for (const auto& [root, rate] : drive_args) roots_.push_back(root), given_.push_back(rate);
    return {};
  }

  // Headers, spine shapes, every expert's tensors (or, for a spine-only
  // checkpoint, its expert generator record), and whether the replicas fit.
  Status validate_checkpoint() {
    DF_ASSIGN(ck_, Checkpoint::open(o_.model_dir));
    DF_ASSIGN(cfg_, ModelConfig::from_json(ck_->config()));
    // Shards that setup has not downloaded yet read as zeros: their values are
    // checked when the store's spine is opened, here only names and shapes.
    DF_TRY(ModelWeights::bind(*ck_, cfg_, /*check_values=*/o_.shards == nullptr).status());
    for (int l = 0; l < cfg_.num_layers; ++l)
      if (cfg_.ffn[l] == FfnKind::MoE) moe_layers_.push_back(l);
    E_ = cfg_.moe.num_experts, M_ = int(moe_layers_.size());
    DF_ASSIGN(payloads_, open_expert_payloads(*ck_, cfg_, moe_layers_));
    expert_bytes_ = payloads_->expert_bytes();
    if (M_ == 0 || expert_bytes_ == 0) return error("{}: the model has no routed experts", o_.model_dir);
    span_ = align_up(expert_bytes_, kSpanAlign);
    DF_ASSIGN(sel_, select_replicas(o_.replicate_hot, o_.replicas_from, moe_layers_, E_));
    // The plan with equal rates: fails now, not after the probe, if the
    // replicas cannot be placed (one drive).
    DF_TRY(plan_placement(M_, E_, span_, std::vector<double>(roots_.size(), 1.0), sel_.hot, sel_.replicas).status());
    if (!o_.replicas_from.empty()) {
      DF_ASSIGN(std::string trace, read_file(o_.replicas_from));
      trace_sha_ = sha256_hex(trace);
    }
    return {};
  }

  // Creates the output and its work records. True when the store is already
  // complete (nothing to do); a streamed store being filled is loaded.
  Result<bool> open_output() {
    std::error_code ec;
    out_ = fs::absolute(o_.out_dir, ec).lexically_normal().string();
    fs::create_directories(out_, ec);
    if (ec) return error("{}: cannot create: {}", out_, ec.message());
    prep_ = (fs::path(out_) / ".prepare").string();
    const bool has_manifest = fs::exists(fs::path(out_) / kManifestName);
    if (fill_ && !has_manifest) return error("{}: no manifest: not a streamed store", out_);
    if (has_manifest) {
      DF_ASSIGN(Manifest old, Manifest::load(out_));
      if (fill_ && old.stream) streamed_ = std::move(old);
    }
    if (!streamed_ && has_manifest) {
      std::error_code e2;
      fs::remove_all(prep_, e2);  // left over from a run killed after the manifest was written
      if (!o_.quiet) std::fprintf(stderr, "%s: store is already complete (remove it to prepare again)\n", out_.c_str());
      return true;
    }
    u_ = Unit{(fs::path(prep_) / "done").string(), o_.pause_ms};
    fs::create_directories(u_.done_dir, ec);
    if (ec) return error("{}: cannot create: {}", u_.done_dir, ec.message());
    return false;
  }

  // A rerun must ask for the same store.
  Status check_options_record() {
    json opts = {{"model", fs::absolute(o_.model_dir).lexically_normal().string()},
                 {"drives", roots_},
                 {"rates", given_},
                 {"replicate_hot", o_.replicate_hot},
                 {"replicas_from", o_.replicas_from},
                 {"spine", o_.spine}};
    if (!o_.replicas_from.empty()) opts["replicas_from_sha256"] = trace_sha_;
    if (auto prev = u_.load("options"); prev.ok()) {
      // Key by key: the record's key order is not part of the options.
      if (const std::string diff = option_differences(*prev, opts); !diff.empty())
        return error("{}: holds an interrupted prepare with different options ({}); rerun with the same options or "
                     "delete {}",
                     out_, diff, prep_);
      return {};
    }
    return u_.save("options", opts);
  }

  Status identify_source() {
    DF_ASSIGN(identity_, source_identity(o_.model_dir, u_, o_.quiet, o_.known_sha256));
    json idj = json::array();
    for (const auto& f : identity_) idj.push_back({f.name, f.size, f.sha256});
    // A streamed store keeps its id (the packs' directory is named for it).
    store_id_ = streamed_ ? streamed_->store_id : sha256_hex(idj.dump() + "\n" + out_).substr(0, 16);
    return {};
  }

  // Drive rates: given, or a short O_DIRECT probe in each root. Roots on one
  // file system share one device's bandwidth: probed once, weighted equally
  // (two probes of one disk differ by noise, not by speed).
  Status measure_drive_rates() {
    const std::vector<std::vector<size_t>> devices = roots_by_device(roots_);
    for (const auto& group : devices) {
      if (group.size() < 2) continue;
      std::string names;
      for (size_t d : group) names += fmt::format("{}{}", names.empty() ? "" : ", ", roots_[d]);
      std::fprintf(stderr,
                   "warning: drive roots %s are on one file system, so they share one device's bandwidth: weighted "
                   "equally (probed once; rates given with DIR:MBPS are kept)\n",
                   names.c_str());
    }
    if (auto rec = u_.load("rates"); rec.ok() && rec->is_array() && rec->size() == roots_.size()) {
      rates_ = rec->get<std::vector<double>>();
      return {};
    }
    rates_ = given_;
    for (const auto& group : devices) {
      double probed = 0;
      for (size_t d : group) {
        if (given_[d] > 0) continue;
        if (probed == 0) {
          const uint64_t block = std::min<uint64_t>(span_, 4 << 20);
          DF_ASSIGN(io::ProbeResult pr,
                    io::probe_directory(roots_[d], std::max<uint64_t>(block * 16, 32 << 20), block, 32, 0.3));
          if (!o_.quiet)
            std::fprintf(stderr, "drive %zu (%s): %.0f MB/s (%s probe)\n", d, roots_[d].c_str(), pr.mb_s,
                         pr.mode().c_str());
          probed = std::max(pr.mb_s, 1.0);
        }
        rates_[d] = probed;
      }
    }
    return u_.save("rates", json(rates_));
  }

  // The placement, the output folders, and the units of work: one spine file
  // per group and one pack per (drive, MoE layer), in layer order (the
  // embedding, then each layer's spine file and its packs on every drive,
  // then the tail), so that a streamed setup needs only the shards of the
  // layer at hand.
  Status plan_work() {
    DF_ASSIGN(plan_, plan_placement(M_, E_, span_, rates_, sel_.hot, sel_.replicas));
    if (streamed_) {
      DF_ASSIGN(plan_, plan_of_manifest(*streamed_, roots_, span_));
    }
    groups_ = spine_groups(*ck_);
    uint64_t total = 0;
    for (const auto& g : groups_) total += g.bytes();
    if (!stream_)  // a streamed store's packs are holes until used
      for (const auto& per_drive : plan_.files)
        for (const auto& f : per_drive) total += f.size() * span_;
    prog_.emplace("writing store", total, o_.quiet);
    std::error_code ec;
    spine_dir_ = (fs::path(out_) / kSpineDirName).string();
    fs::create_directories(spine_dir_, ec);
    if (ec) return error("{}: cannot create: {}", spine_dir_, ec.message());
    man_.store_id = store_id_;
    for (size_t d = 0; d < roots_.size(); ++d) {
      man_.drives.push_back({roots_[d], rates_[d], {}});
      const std::string dir = man_.pack_dir(int(d));
      fs::create_directories(dir, ec);
      if (ec) return error("drive {} ({}): cannot create {}: {}", d, roots_[d], dir, ec.message());
    }
    // make-model's spine-only checkpoints are written by rename, never in place,
    // so their shards can be shared with the store; a user's checkpoint is copied.
    link_source_spine_ = has_expert_generator(o_.model_dir);
    auto group_key = [&](const std::string& file) -> long {
      if (file == "spine-embed.safetensors") return -1;
      int layer = 0;
      if (std::sscanf(file.c_str(), "spine-layer-%d.safetensors", &layer) == 1) return 2L * layer;
      return 2L * cfg_.num_layers + 2;  // the tail, and anything else
    };
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      Work w;
      w.group = int(gi), w.key = group_key(groups_[gi].file);
      w.path = (fs::path(spine_dir_) / groups_[gi].file).string(), w.record = "spine-" + groups_[gi].file;
      for (const TensorInfo* t : groups_[gi].tensors)
        if (std::find(w.shards.begin(), w.shards.end(), *t->file) == w.shards.end()) w.shards.push_back(*t->file);
      work_.push_back(std::move(w));
    }
    for (size_t d = 0; d < roots_.size(); ++d)
      for (int m = 0; m < M_; ++m) {
        if (plan_.files[d][m].empty()) continue;
        Work w;
        w.drive = int(d), w.m = m, w.key = 2L * moe_layers_[m] + 1;
        const std::string name = fmt::format("layer-{:03d}.pack", moe_layers_[m]);
        w.path = (fs::path(man_.pack_dir(int(d))) / name).string(), w.record = fmt::format("pack-{}-{}", d, name);
        if (!stream_)
          for (int e : plan_.files[d][m])
            for (const auto& f : payloads_->files(m, e))
              if (std::find(w.shards.begin(), w.shards.end(), f) == w.shards.end()) w.shards.push_back(f);
        work_.push_back(std::move(w));
      }
    std::stable_sort(work_.begin(), work_.end(), [](const Work& a, const Work& b) { return a.key < b.key; });
    spine_out_.assign(groups_.size(), {});
    pack_sums_.assign(roots_.size(), std::vector<std::vector<Hash128>>(size_t(M_)));
    if (fill_) {
      DF_ASSIGN(fetched_, FetchedLog::open(out_, M_, E_));
    }
    return {};
  }

  // The units not recorded by an earlier run, each given the shards it reads;
  // a shard is given back after the last unit that reads it.
  Status run_work() {
    std::vector<const Work*> todo;
    for (const auto& w : work_) {
      DF_ASSIGN(bool done, recorded(w));
      if (!done) todo.push_back(&w);
    }
    std::map<std::string, int> readers;
    for (const Work* w : todo)
      for (const auto& f : w->shards) ++readers[f];
    for (const Work* w : todo) {
      if (o_.shards)
        for (const auto& f : w->shards) {
          if (stream_ && w->group >= 0) {
            // Only the spine's own bytes of the shard (the rest is experts).
            std::vector<std::pair<uint64_t, uint64_t>> ranges;
            for (const TensorInfo* t : groups_[size_t(w->group)].tensors)
              if (*t->file == f) ranges.push_back({t->file_offset, t->nbytes});
            DF_TRY(o_.shards->ensure_ranges(f, ranges));
          } else {
            DF_TRY(o_.shards->ensure(f));
          }
        }
      DF_TRY(run_unit(*w));
      if (o_.shards)
        for (const auto& f : w->shards)
          if (--readers[f] == 0) DF_TRY(o_.shards->release(f));
    }
    return {};
  }

  // A unit recorded by an earlier run, whose file is still there: its results from the record.
  Result<bool> recorded(const Work& w) {
    auto rec = u_.load(w.record);
    if (!rec.ok()) return false;
    if (w.group >= 0) {
      if (file_size_or_max(w.path) != rec->value("size", uint64_t(0))) return false;
      DF_ASSIGN(Hash128 h, Hash128::from_hex(rec->value("xxh3", "")));
      spine_out_[size_t(w.group)] = {groups_[size_t(w.group)].file, rec->value("size", uint64_t(0)), h};
      prog_->add(groups_[size_t(w.group)].bytes());
      return true;
    }
    const uint64_t size = plan_.files[size_t(w.drive)][size_t(w.m)].size() * span_;
    if (file_size_or_max(w.path) != size || rec->value("size", uint64_t(0)) != size) return false;
    if (rec->value("streamed", false) != stream_) return false;
    auto& sums = pack_sums_[size_t(w.drive)][size_t(w.m)];
    if (stream_) return true;  // no sums: its experts are fetched on first use
    for (const auto& x : rec->at("sums")) {
      DF_ASSIGN(Hash128 h, Hash128::from_hex(x.get<std::string>()));
      sums.push_back(h);
    }
    prog_->add(size);
    return true;
  }

  Status run_unit(const Work& w) {
    if (w.group >= 0) return fill_ ? verify_streamed_spine(w) : write_spine(w);
    if (stream_) return write_sparse_pack(w);
    return fill_ ? fill_pack(w) : write_full_pack(w);
  }

  // Fill: the spine a streamed setup fetched by ranges, checked against the
  // verified shards: rewritten to the side and compared.
  Status verify_streamed_spine(const Work& w) {
    const SpineGroup& g = groups_[size_t(w.group)];
    const std::string side = w.path + ".verify";
    DF_TRY(write_spine_group(g, spine_format_, side, &*prog_));
    DF_ASSIGN(Hash128 h, xxh3_128_file(side));
    const uint64_t size = file_size_or_max(side);
    std::error_code e3;
    fs::remove(side, e3);
    const auto it = std::find_if(streamed_->spine_files.begin(), streamed_->spine_files.end(),
                                 [&](const StoreFile& f) { return f.name == g.file; });
    if (it == streamed_->spine_files.end() || !(it->xxh3 == h) || it->size != size)
      return error("{}: the spine file installed by `setup --stream` differs from the one the verified shards give "
                   "(xxh3-128 {} installed, {} verified): the bytes fetched by range were not the published ones; "
                   "install the model again without --stream",
                   w.path, it == streamed_->spine_files.end() ? "none" : it->xxh3.hex(), h.hex());
    DF_TRY(u_.save(w.record, {{"size", size}, {"xxh3", h.hex()}}));
    spine_out_[size_t(w.group)] = {g.file, size, h};
    return {};
  }

  Status write_spine(const Work& w) {
    const SpineGroup& g = groups_[size_t(w.group)];
    // A generated spine is already in pack layout: link it (BF16 only; int8 converts).
    if (link_source_spine_ && spine_format_ == SpineFormat::BF16 && link_spine_group(*ck_, g, w.path + ".tmp")) {
      prog_->add(g.bytes());
    } else {
      DF_TRY(write_spine_group(g, spine_format_, w.path + ".tmp", &*prog_));
    }
    DF_TRY(fsync_path(w.path + ".tmp"));
    DF_ASSIGN(Hash128 h, xxh3_128_file(w.path + ".tmp"));
    const uint64_t size = file_size_or_max(w.path + ".tmp");
    DF_TRY(rename_durable(w.path + ".tmp", w.path));
    DF_TRY(u_.save(w.record, {{"size", size}, {"xxh3", h.hex()}}));
    spine_out_[size_t(w.group)] = {g.file, size, h};
    return {};
  }

  // Stream: a pack of holes; its experts are fetched on first use.
  Status write_sparse_pack(const Work& w) {
    const uint64_t size = uint64_t(plan_.files[size_t(w.drive)][size_t(w.m)].size()) * span_;
    DF_TRY(create_sparse_pack(w.path, size));
    return u_.save(w.record, {{"size", size}, {"streamed", true}});
  }

  // Fill: the streamed pack completed in place; an expert fetched on first use
  // whose bytes differ from the verified shard's is rewritten and reported.
  Status fill_pack(const Work& w) {
    const std::vector<int>& list = plan_.files[size_t(w.drive)][size_t(w.m)];
    DF_ASSIGN(std::vector<Hash128> sums, fill_pack_in_place(w.path, w.m, list, *payloads_, span_, *prog_));
    json js = json::array();
    for (size_t i = 0; i < list.size(); ++i) {
      js.push_back(sums[i].hex());
      if (auto h = fetched_->lookup(w.m, list[i]); h && !(*h == sums[i])) {
        ++rewritten_;
        std::fprintf(stderr, "warning: layer %d expert %d: the copy fetched on first use differed from the verified "
                     "shard's bytes (xxh3-128 %s, verified %s); rewritten\n", moe_layers_[size_t(w.m)], list[i],
                     h->hex().c_str(), sums[i].hex().c_str());
      }
    }
    DF_TRY(u_.save(w.record, {{"size", uint64_t(list.size()) * span_}, {"sums", js}}));
    pack_sums_[size_t(w.drive)][size_t(w.m)] = std::move(sums);
    return {};
  }

  Status write_full_pack(const Work& w) {
    const std::vector<int>& list = plan_.files[size_t(w.drive)][size_t(w.m)];
    DF_ASSIGN(std::vector<Hash128> sums, write_pack(w.path, w.m, list, *payloads_, span_, *prog_));
    json js = json::array();
    for (const auto& h : sums) js.push_back(h.hex());
    DF_TRY(u_.save(w.record, {{"size", uint64_t(list.size()) * span_}, {"sums", js}}));
    pack_sums_[size_t(w.drive)][size_t(w.m)] = std::move(sums);
    return {};
  }

  // The spine's index and side files (config, tokenizer, ...), after its shards.
  Status write_spine_side_files() {
    spine_files_ = spine_out_;
    const std::string idx = (fs::path(spine_dir_) / "model.safetensors.index.json").string();
    DF_TRY(write_spine_index(groups_, spine_format_, idx + ".tmp"));
    DF_TRY(fsync_path(idx + ".tmp"));
    DF_TRY(rename_durable(idx + ".tmp", idx));
    std::vector<std::string> side = spine_side_files(o_.model_dir);
    side.insert(side.begin(), "model.safetensors.index.json");
    for (const auto& name : side) {
      const std::string dst = (fs::path(spine_dir_) / name).string();
      if (name != "model.safetensors.index.json") {
        DF_ASSIGN(std::string text, read_file((fs::path(o_.model_dir) / name).string()));
        DF_TRY(write_file_atomic(dst, text));
      }
      DF_ASSIGN(Hash128 h, xxh3_128_file(dst));
      spine_files_.push_back({name, file_size_or_max(dst), h});
    }
    return {};
  }

  // Every expert's placements (primary first, as planned) and checksum.
  Status place_experts() {
    const uint64_t total_experts = uint64_t(M_) * E_;
    man_.experts.assign(total_experts, {});
    std::vector<char> have_sum(total_experts, 0);
    for (size_t d = 0; d < roots_.size(); ++d) {
      for (int m = 0; m < M_; ++m) {
        const std::vector<int>& list = plan_.files[d][m];
        if (list.empty()) continue;
        const std::string name = fmt::format("layer-{:03d}.pack", moe_layers_[m]);
        const std::vector<Hash128>& sums = pack_sums_[d][size_t(m)];
        if (!stream_ && sums.size() != list.size())
          return error("{}: record lists {} checksums for {} experts", u_.record(fmt::format("pack-{}-{}", d, name)),
                       sums.size(), list.size());
        const int file = int(man_.drives[d].packs.size());
        man_.drives[d].packs.push_back({name, uint64_t(list.size()) * span_, {}});
        for (size_t i = 0; i < list.size(); ++i) {
          const size_t idx = size_t(m) * E_ + list[i];
          ExpertEntry& x = man_.experts[idx];
          if (stream_) {
            x.has_sum = false;
            x.at.push_back({int(d), file, i * span_});
            continue;
          }
          if (have_sum[idx] && !(x.xxh3 == sums[i]))
            return error("layer {} expert {}: copies differ between drives (a source file changed during prepare?)",
                         moe_layers_[m], list[i]);
          x.xxh3 = sums[i], have_sum[idx] = 1;
          x.at.push_back({int(d), file, i * span_});
        }
      }
    }
    for (size_t idx = 0; idx < total_experts; ++idx) {
      auto& at = man_.experts[idx].at;
      const int primary = plan_.copies[idx][0];
      std::stable_partition(at.begin(), at.end(), [&](const Placement& p) { return p.drive == primary; });
    }
    return {};
  }

  // The manifest, written last (packs in (drive, MoE layer) order): the store
  // is complete from this rename on, and the work records go.
  Status write_manifest() {
    man_.source_dir = o_.source_label.empty() ? fs::absolute(o_.model_dir).lexically_normal().string() : o_.source_label;
    man_.source_files = identity_;
    man_.spine_dtype = o_.spine;
    man_.spine_files = spine_files_;
    man_.num_layers = cfg_.num_layers;
    man_.num_experts = E_;
    man_.expert_bytes = expert_bytes_;
    man_.model_type = cfg_.model_type;
    man_.expert_format = std::string(expert_format_name(cfg_.moe.format));
    man_.span_bytes = span_;
    man_.moe_layers = moe_layers_;
    if (stream_) man_.stream = o_.stream_source;
    DF_TRY(place_experts());
    prog_->finish();
    // Round-trip check before publishing: the manifest must parse and validate.
    const std::string text = man_.to_json();
    DF_TRY(Manifest::parse(text, "new manifest").status());
    DF_TRY(write_file_atomic((fs::path(out_) / kManifestName).string(), text));
    std::error_code ec;
    fs::remove_all(prep_, ec);
    if (fill_) {
      fs::remove_all(fs::path(out_) / kStreamDirName, ec);  // every expert now has its checksum in the manifest
      if (!o_.quiet && rewritten_)
        std::fprintf(stderr, "%zu experts fetched on first use differed from the verified shards and were rewritten\n",
                     rewritten_);
    }
    DF_TRY(fsync_path(out_));
    if (!o_.quiet) print_summary();
    return {};
  }

  void print_summary() const {
    const uint64_t total_experts = uint64_t(M_) * E_;
    uint64_t copies = 0;
    for (const auto& x : man_.experts) copies += x.at.size();
    uint64_t spine_bytes = 0;
    for (const auto& f : spine_files_)
      if (f.name.ends_with(".safetensors")) spine_bytes += f.size;
    std::fprintf(stderr, "store %s: %llu experts (%llu replicas, %s) on %zu drives, spine %s: %zu files, %.1f MB\n",
                 out_.c_str(), (unsigned long long)total_experts, (unsigned long long)(copies - total_experts),
                 payloads_->describe().c_str(), roots_.size(), spine_label(o_.spine).c_str(), spine_files_.size(),
                 spine_bytes / 1e6);
  }

  const PrepareOptions& o_;
  const bool stream_, fill_;
  SpineFormat spine_format_ = SpineFormat::BF16;
  std::vector<std::string> roots_;
  std::vector<double> given_, rates_;
  // The checkpoint.
  std::unique_ptr<Checkpoint> ck_;
  ModelConfig cfg_;
  std::vector<int> moe_layers_;
  int E_ = 0, M_ = 0;
  std::unique_ptr<ExpertPayloads> payloads_;
  uint64_t expert_bytes_ = 0, span_ = 0;
  ReplicaSelection sel_;
  std::string trace_sha_;
  // The output.
  std::string out_, prep_, spine_dir_, store_id_;
  std::optional<Manifest> streamed_;  // fill: the streamed store being completed
  Unit u_;
  std::vector<SourceFile> identity_;
  PlacementPlan plan_;
  std::vector<SpineGroup> groups_;
  bool link_source_spine_ = false;
  std::vector<Work> work_;
  std::optional<Progress> prog_;
  Manifest man_;
  std::vector<StoreFile> spine_out_, spine_files_;
  std::vector<std::vector<std::vector<Hash128>>> pack_sums_;  // [drive][MoE index] per expert in the pack
  std::unique_ptr<FetchedLog> fetched_;  // fill: what the streamed store already fetched
  size_t rewritten_ = 0;
};

}  // namespace

Status prepare_store(const PrepareOptions& o) { return StorePreparation(o).run(); }

}  // namespace deltafin
