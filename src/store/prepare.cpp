#include "store/prepare.h"

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
  int pause_ms;
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

}  // namespace

Status prepare_store(const PrepareOptions& o) {
  // Everything the options can get wrong is checked before anything is
  // written, so a refused run leaves nothing behind (and no record that a
  // corrected rerun would call "different options").
  auto format_or = spine_format_from_name(o.spine);
  if (!format_or.ok()) return error("--spine '{}': expected bf16 or int8 (row-int8, lossy)", o.spine);
  const SpineFormat spine_format = *format_or;
  if (o.stream_mode == StreamMode::Stream && (!o.stream_source || !o.shards))
    return error("a streamed store needs its source repository and shards (it is made by `deltafin setup --stream`)");
  DF_TRY(check_prepare_paths(o));
  DF_ASSIGN(auto drive_args, parse_drive_args(o.drives));
  std::vector<std::string> roots;
  std::vector<double> given;
  for (const auto& [root, rate] : drive_args) roots.push_back(root), given.push_back(rate);

  // Validate the checkpoint: headers, spine shapes, every expert's six tensors
  // (or, for a spine-only checkpoint, its expert generator record).
  DF_ASSIGN(auto ck, Checkpoint::open(o.model_dir));
  DF_ASSIGN(ModelConfig cfg, ModelConfig::from_json(ck->config()));
  DF_TRY(ModelWeights::bind(*ck, cfg).status());
  std::vector<int> moe_layers;
  for (int l = 0; l < cfg.num_layers; ++l)
    if (cfg.ffn[l] == FfnKind::MoE) moe_layers.push_back(l);
  const int E = cfg.moe.num_experts, M = int(moe_layers.size());
  DF_ASSIGN(std::unique_ptr<ExpertPayloads> payloads, open_expert_payloads(*ck, cfg, moe_layers));
  const uint64_t expert_bytes = payloads->expert_bytes();
  if (M == 0 || expert_bytes == 0) return error("{}: the model has no routed experts", o.model_dir);
  const uint64_t span = align_up(expert_bytes, kSpanAlign);
  DF_ASSIGN(ReplicaSelection sel, select_replicas(o.replicate_hot, o.replicas_from, moe_layers, E));
  // The plan with equal rates: fails now, not after the probe, if the
  // replicas cannot be placed (one drive).
  DF_TRY(plan_placement(M, E, span, std::vector<double>(roots.size(), 1.0), sel.hot, sel.replicas).status());
  std::string trace_sha;
  if (!o.replicas_from.empty()) {
    DF_ASSIGN(std::string trace, read_file(o.replicas_from));
    trace_sha = sha256_hex(trace);
  }

  std::error_code ec;
  const std::string out = fs::absolute(o.out_dir, ec).lexically_normal().string();
  fs::create_directories(out, ec);
  if (ec) return error("{}: cannot create: {}", out, ec.message());
  const std::string prep = (fs::path(out) / ".prepare").string();
  const bool stream = o.stream_mode == StreamMode::Stream, fill = o.stream_mode == StreamMode::Fill;
  std::optional<Manifest> streamed;  // fill: the streamed store being completed
  if (fill && !fs::exists(fs::path(out) / kManifestName)) return error("{}: no manifest: not a streamed store", out);
  if (fs::exists(fs::path(out) / kManifestName)) {
    DF_ASSIGN(Manifest old, Manifest::load(out));
    if (fill && old.stream) {
      streamed = std::move(old);
    }
  }
  if (!streamed && fs::exists(fs::path(out) / kManifestName)) {
    std::error_code e2;
    fs::remove_all(prep, e2);  // left over from a run killed after the manifest was written
    if (!o.quiet) std::fprintf(stderr, "%s: store is already complete (remove it to prepare again)\n", out.c_str());
    return {};
  }
  Unit u{(fs::path(prep) / "done").string(), o.pause_ms};
  fs::create_directories(u.done_dir, ec);
  if (ec) return error("{}: cannot create: {}", u.done_dir, ec.message());

  // Options: a rerun must ask for the same store.
  json opts = {{"model", fs::absolute(o.model_dir).lexically_normal().string()},
               {"drives", roots},
               {"rates", given},
               {"replicate_hot", o.replicate_hot},
               {"replicas_from", o.replicas_from},
               {"spine", o.spine}};
  if (!o.replicas_from.empty()) opts["replicas_from_sha256"] = trace_sha;
  if (auto prev = u.load("options"); prev.ok()) {
    // Key by key: the record's key order is not part of the options.
    if (const std::string diff = option_differences(*prev, opts); !diff.empty())
      return error("{}: holds an interrupted prepare with different options ({}); rerun with the same options or "
                   "delete {}",
                   out, diff, prep);
  } else {
    DF_TRY(u.save("options", opts));
  }

  DF_ASSIGN(std::vector<SourceFile> identity, source_identity(o.model_dir, u, o.quiet, o.known_sha256));
  json idj = json::array();
  for (const auto& f : identity) idj.push_back({f.name, f.size, f.sha256});
  // A streamed store keeps its id (the packs' directory is named for it).
  const std::string store_id = streamed ? streamed->store_id : sha256_hex(idj.dump() + "\n" + out).substr(0, 16);

  // Drive rates: given, or a short O_DIRECT probe in each root. Roots on one
  // file system share one device's bandwidth: probed once, weighted equally
  // (two probes of one disk differ by noise, not by speed).
  const std::vector<std::vector<size_t>> devices = roots_by_device(roots);
  for (const auto& group : devices) {
    if (group.size() < 2) continue;
    std::string names;
    for (size_t d : group) names += fmt::format("{}{}", names.empty() ? "" : ", ", roots[d]);
    std::fprintf(stderr,
                 "warning: drive roots %s are on one file system, so they share one device's bandwidth: weighted "
                 "equally (probed once; rates given with DIR:MBPS are kept)\n",
                 names.c_str());
  }
  std::vector<double> rates;
  if (auto rec = u.load("rates"); rec.ok() && rec->is_array() && rec->size() == roots.size()) {
    rates = rec->get<std::vector<double>>();
  } else {
    rates = given;
    for (const auto& group : devices) {
      double probed = 0;
      for (size_t d : group) {
        if (given[d] > 0) continue;
        if (probed == 0) {
          const uint64_t block = std::min<uint64_t>(span, 4 << 20);
          DF_ASSIGN(io::ProbeResult pr,
                    io::probe_directory(roots[d], std::max<uint64_t>(block * 16, 32 << 20), block, 32, 0.3));
          if (!o.quiet)
            std::fprintf(stderr, "drive %zu (%s): %.0f MB/s (%s probe)\n", d, roots[d].c_str(), pr.mb_s, pr.mode().c_str());
          probed = std::max(pr.mb_s, 1.0);
        }
        rates[d] = probed;
      }
    }
    DF_TRY(u.save("rates", json(rates)));
  }

  // Which experts get a replica.
  const uint64_t total_experts = uint64_t(M) * E;
  DF_ASSIGN(PlacementPlan plan, plan_placement(M, E, span, rates, sel.hot, sel.replicas));
  if (streamed) {
    DF_ASSIGN(plan, plan_of_manifest(*streamed, roots, span));
  }

  // The units of work: one spine file per group and one pack per (drive, MoE
  // layer), done in layer order (the embedding, then each layer's spine file
  // and its packs on every drive, then the tail), so that a streamed setup
  // needs only the shards of the layer at hand.
  const std::vector<SpineGroup> groups = spine_groups(*ck);
  uint64_t total = 0;
  for (const auto& g : groups) total += g.bytes();
  if (!stream)  // a streamed store's packs are holes until used
    for (const auto& per_drive : plan.files)
      for (const auto& f : per_drive) total += f.size() * span;
  Progress prog("writing store", total, o.quiet);
  const std::string spine_dir = (fs::path(out) / kSpineDirName).string();
  fs::create_directories(spine_dir, ec);
  if (ec) return error("{}: cannot create: {}", spine_dir, ec.message());
  Manifest man;
  man.store_id = store_id;
  for (size_t d = 0; d < roots.size(); ++d) {
    man.drives.push_back({roots[d], rates[d], {}});
    const std::string dir = man.pack_dir(int(d));
    fs::create_directories(dir, ec);
    if (ec) return error("drive {} ({}): cannot create {}: {}", d, roots[d], dir, ec.message());
  }
  // make-model's spine-only checkpoints are written by rename, never in place,
  // so their shards can be shared with the store; a user's checkpoint is copied.
  const bool link_source_spine = has_expert_generator(o.model_dir);
  struct Work {
    int group = -1, drive = -1, m = -1;  // a spine group, or the pack of (drive, MoE index)
    long key = 0;                        // layer order
    std::string path, record;
    std::vector<std::string> shards;
  };
  auto group_key = [&](const std::string& file) -> long {
    if (file == "spine-embed.safetensors") return -1;
    int layer = 0;
    if (std::sscanf(file.c_str(), "spine-layer-%d.safetensors", &layer) == 1) return 2L * layer;
    return 2L * cfg.num_layers + 2;  // the tail, and anything else
  };
  std::vector<Work> work;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Work w;
    w.group = int(gi), w.key = group_key(groups[gi].file);
    w.path = (fs::path(spine_dir) / groups[gi].file).string(), w.record = "spine-" + groups[gi].file;
    for (const TensorInfo* t : groups[gi].tensors)
      if (std::find(w.shards.begin(), w.shards.end(), *t->file) == w.shards.end()) w.shards.push_back(*t->file);
    work.push_back(std::move(w));
  }
  for (size_t d = 0; d < roots.size(); ++d)
    for (int m = 0; m < M; ++m) {
      if (plan.files[d][m].empty()) continue;
      Work w;
      w.drive = int(d), w.m = m, w.key = 2L * moe_layers[m] + 1;
      const std::string name = fmt::format("layer-{:03d}.pack", moe_layers[m]);
      w.path = (fs::path(man.pack_dir(int(d))) / name).string(), w.record = fmt::format("pack-{}-{}", d, name);
      if (!stream)
        for (int e : plan.files[d][m])
          for (const auto& f : payloads->files(m, e))
            if (std::find(w.shards.begin(), w.shards.end(), f) == w.shards.end()) w.shards.push_back(f);
      work.push_back(std::move(w));
    }
  std::stable_sort(work.begin(), work.end(), [](const Work& a, const Work& b) { return a.key < b.key; });

  std::vector<StoreFile> spine_out(groups.size());
  std::vector<std::vector<std::vector<Hash128>>> pack_sums(roots.size(), std::vector<std::vector<Hash128>>(size_t(M)));
  // A unit recorded by an earlier run, whose file is still there: its results from the record.
  auto recorded = [&](const Work& w) -> Result<bool> {
    auto rec = u.load(w.record);
    if (!rec.ok()) return false;
    if (w.group >= 0) {
      if (file_size_or_max(w.path) != rec->value("size", uint64_t(0))) return false;
      DF_ASSIGN(Hash128 h, Hash128::from_hex(rec->value("xxh3", "")));
      spine_out[size_t(w.group)] = {groups[size_t(w.group)].file, rec->value("size", uint64_t(0)), h};
      prog.add(groups[size_t(w.group)].bytes());
      return true;
    }
    const uint64_t size = plan.files[size_t(w.drive)][size_t(w.m)].size() * span;
    if (file_size_or_max(w.path) != size || rec->value("size", uint64_t(0)) != size) return false;
    if (rec->value("streamed", false) != stream) return false;
    auto& sums = pack_sums[size_t(w.drive)][size_t(w.m)];
    if (stream) return true;  // no sums: its experts are fetched on first use
    for (const auto& x : rec->at("sums")) {
      DF_ASSIGN(Hash128 h, Hash128::from_hex(x.get<std::string>()));
      sums.push_back(h);
    }
    prog.add(size);
    return true;
  };
  std::unique_ptr<FetchedLog> fetched;  // fill: what the streamed store already fetched
  size_t rewritten = 0;
  if (fill) {
    DF_ASSIGN(fetched, FetchedLog::open(out, M, E));
  }
  auto run_unit = [&](const Work& w) -> Status {
    if (w.group >= 0 && fill) {
      // The spine a streamed setup fetched by ranges, now checked against
      // the verified shards: rewritten to the side and compared.
      const SpineGroup& g = groups[size_t(w.group)];
      const std::string side = w.path + ".verify";
      DF_TRY(write_spine_group(g, spine_format, side, &prog));
      DF_ASSIGN(Hash128 h, xxh3_128_file(side));
      const uint64_t size = file_size_or_max(side);
      std::error_code e3;
      fs::remove(side, e3);
      const auto it = std::find_if(streamed->spine_files.begin(), streamed->spine_files.end(),
                                   [&](const StoreFile& f) { return f.name == g.file; });
      if (it == streamed->spine_files.end() || !(it->xxh3 == h) || it->size != size)
        return error("{}: the spine file installed by `setup --stream` differs from the one the verified shards give "
                     "(xxh3-128 {} installed, {} verified): the bytes fetched by range were not the published ones; "
                     "install the model again without --stream",
                     w.path, it == streamed->spine_files.end() ? "none" : it->xxh3.hex(), h.hex());
      DF_TRY(u.save(w.record, {{"size", size}, {"xxh3", h.hex()}}));
      spine_out[size_t(w.group)] = {g.file, size, h};
      return {};
    }
    if (w.group < 0 && stream) {
      const uint64_t size = uint64_t(plan.files[size_t(w.drive)][size_t(w.m)].size()) * span;
      DF_TRY(create_sparse_pack(w.path, size));
      return u.save(w.record, {{"size", size}, {"streamed", true}});
    }
    if (w.group < 0 && fill) {
      const std::vector<int>& list = plan.files[size_t(w.drive)][size_t(w.m)];
      DF_ASSIGN(std::vector<Hash128> sums, fill_pack_in_place(w.path, w.m, list, *payloads, span, prog));
      json js = json::array();
      for (size_t i = 0; i < list.size(); ++i) {
        js.push_back(sums[i].hex());
        if (auto h = fetched->lookup(w.m, list[i]); h && !(*h == sums[i])) {
          ++rewritten;
          std::fprintf(stderr, "warning: layer %d expert %d: the copy fetched on first use differed from the verified "
                       "shard's bytes (xxh3-128 %s, verified %s); rewritten\n", moe_layers[size_t(w.m)], list[i],
                       h->hex().c_str(), sums[i].hex().c_str());
        }
      }
      DF_TRY(u.save(w.record, {{"size", uint64_t(list.size()) * span}, {"sums", js}}));
      pack_sums[size_t(w.drive)][size_t(w.m)] = std::move(sums);
      return {};
    }
    if (w.group >= 0) {
      const SpineGroup& g = groups[size_t(w.group)];
      // A generated spine is already in pack layout: link it (BF16 only; int8 converts).
      if (link_source_spine && spine_format == SpineFormat::BF16 && link_spine_group(*ck, g, w.path + ".tmp")) {
        prog.add(g.bytes());
      } else {
        DF_TRY(write_spine_group(g, spine_format, w.path + ".tmp", &prog));
      }
      DF_TRY(fsync_path(w.path + ".tmp"));
      DF_ASSIGN(Hash128 h, xxh3_128_file(w.path + ".tmp"));
      const uint64_t size = file_size_or_max(w.path + ".tmp");
      DF_TRY(rename_durable(w.path + ".tmp", w.path));
      DF_TRY(u.save(w.record, {{"size", size}, {"xxh3", h.hex()}}));
      spine_out[size_t(w.group)] = {g.file, size, h};
      return {};
    }
    const std::vector<int>& list = plan.files[size_t(w.drive)][size_t(w.m)];
    DF_ASSIGN(std::vector<Hash128> sums, write_pack(w.path, w.m, list, *payloads, span, prog));
    json js = json::array();
    for (const auto& h : sums) js.push_back(h.hex());
    DF_TRY(u.save(w.record, {{"size", uint64_t(list.size()) * span}, {"sums", js}}));
    pack_sums[size_t(w.drive)][size_t(w.m)] = std::move(sums);
    return {};
  };
  std::vector<const Work*> todo;
  for (const auto& w : work) {
    DF_ASSIGN(bool done, recorded(w));
    if (!done) todo.push_back(&w);
  }
  // A shard is given back after the last unit that reads it.
  std::map<std::string, int> readers;
  for (const Work* w : todo)
    for (const auto& f : w->shards) ++readers[f];
  for (const Work* w : todo) {
    if (o.shards)
      for (const auto& f : w->shards) {
        if (stream && w->group >= 0) {
          // Only the spine's own bytes of the shard (the rest is experts).
          std::vector<std::pair<uint64_t, uint64_t>> ranges;
          for (const TensorInfo* t : groups[size_t(w->group)].tensors)
            if (*t->file == f) ranges.push_back({t->file_offset, t->nbytes});
          DF_TRY(o.shards->ensure_ranges(f, ranges));
        } else {
          DF_TRY(o.shards->ensure(f));
        }
      }
    DF_TRY(run_unit(*w));
    if (o.shards)
      for (const auto& f : w->shards)
        if (--readers[f] == 0) DF_TRY(o.shards->release(f));
  }

  // The spine's index and side files (config, tokenizer, ...).
  std::vector<StoreFile> spine_files = spine_out;
  {
    const std::string idx = (fs::path(spine_dir) / "model.safetensors.index.json").string();
    DF_TRY(write_spine_index(groups, spine_format, idx + ".tmp"));
    DF_TRY(fsync_path(idx + ".tmp"));
    DF_TRY(rename_durable(idx + ".tmp", idx));
    std::vector<std::string> side = spine_side_files(o.model_dir);
    side.insert(side.begin(), "model.safetensors.index.json");
    for (const auto& name : side) {
      const std::string dst = (fs::path(spine_dir) / name).string();
      if (name != "model.safetensors.index.json") {
        DF_ASSIGN(std::string text, read_file((fs::path(o.model_dir) / name).string()));
        DF_TRY(write_file_atomic(dst, text));
      }
      DF_ASSIGN(Hash128 h, xxh3_128_file(dst));
      spine_files.push_back({name, file_size_or_max(dst), h});
    }
  }

  // The manifest: packs in (drive, MoE layer) order.
  man.source_dir = o.source_label.empty() ? fs::absolute(o.model_dir).lexically_normal().string() : o.source_label;
  man.source_files = identity;
  man.spine_dtype = o.spine;
  man.spine_files = spine_files;
  man.num_layers = cfg.num_layers;
  man.num_experts = E;
  man.expert_bytes = expert_bytes;
  man.span_bytes = span;
  man.moe_layers = moe_layers;
  if (stream) man.stream = o.stream_source;
  man.experts.assign(total_experts, {});
  std::vector<char> have_sum(total_experts, 0);
  for (size_t d = 0; d < roots.size(); ++d) {
    for (int m = 0; m < M; ++m) {
      const std::vector<int>& list = plan.files[d][m];
      if (list.empty()) continue;
      const std::string name = fmt::format("layer-{:03d}.pack", moe_layers[m]);
      const std::vector<Hash128>& sums = pack_sums[d][size_t(m)];
      if (!stream && sums.size() != list.size())
        return error("{}: record lists {} checksums for {} experts", u.record(fmt::format("pack-{}-{}", d, name)),
                     sums.size(), list.size());
      const int file = int(man.drives[d].packs.size());
      man.drives[d].packs.push_back({name, uint64_t(list.size()) * span, {}});
      for (size_t i = 0; i < list.size(); ++i) {
        ExpertEntry& x = man.experts[size_t(m) * E + list[i]];
        const size_t idx = size_t(m) * E + list[i];
        if (stream) {
          x.has_sum = false;
          x.at.push_back({int(d), file, i * span});
          continue;
        }
        if (have_sum[idx] && !(x.xxh3 == sums[i]))
          return error("layer {} expert {}: copies differ between drives (a source file changed during prepare?)", moe_layers[m], list[i]);
        x.xxh3 = sums[i], have_sum[idx] = 1;
        x.at.push_back({int(d), file, i * span});
      }
    }
  }
  // Primary first, as planned.
  for (size_t idx = 0; idx < total_experts; ++idx) {
    auto& at = man.experts[idx].at;
    const int primary = plan.copies[idx][0];
    std::stable_partition(at.begin(), at.end(), [&](const Placement& p) { return p.drive == primary; });
  }
  prog.finish();
  // Round-trip check before publishing: the manifest must parse and validate.
  const std::string text = man.to_json();
  DF_TRY(Manifest::parse(text, "new manifest").status());
  DF_TRY(write_file_atomic((fs::path(out) / kManifestName).string(), text));
  fs::remove_all(prep, ec);
  if (fill) {
    fs::remove_all(fs::path(out) / kStreamDirName, ec);  // every expert now has its checksum in the manifest
    if (!o.quiet && rewritten)
      std::fprintf(stderr, "%zu experts fetched on first use differed from the verified shards and were rewritten\n",
                   rewritten);
  }
  DF_TRY(fsync_path(out));
  if (!o.quiet) {
    uint64_t copies = 0;
    for (const auto& x : man.experts) copies += x.at.size();
    uint64_t spine_bytes = 0;
    for (const auto& f : spine_files)
      if (f.name.ends_with(".safetensors")) spine_bytes += f.size;
    std::fprintf(stderr, "store %s: %llu experts (%llu replicas, %s) on %zu drives, spine %s: %zu files, %.1f MB\n",
                 out.c_str(), (unsigned long long)total_experts, (unsigned long long)(copies - total_experts),
                 payloads->describe().c_str(), roots.size(), spine_label(o.spine).c_str(), spine_files.size(),
                 spine_bytes / 1e6);
  }
  return {};
}

}  // namespace deltafin
