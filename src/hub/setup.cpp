#include "hub/setup.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/fd_closer.h"
#include "hub/download.h"
#include "hub/hub_api.h"
#include "io/checksum.h"
#include "store/fs_util.h"
#include "store/manifest.h"
#include "store/progress.h"

namespace deltafin::hub {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kSpan = 4096;
constexpr uint64_t kMaxHeader = 100ull << 20;  // the safetensors format's own limit

void say(const SetupOptions& o, const std::string& line) {
  if (!o.prepare.quiet) std::fprintf(stderr, "setup: %s\n", line.c_str());
}

std::string gb(uint64_t b) { return fmt::format("{:.2f} GB", double(b) / 1e9); }

uint64_t le64(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[size_t(i)]);
  return v;
}

// The header of a remote shard, by two Range requests (its length, then its JSON).
Result<std::string> remote_header(HttpClient& http, const std::string& url, uint64_t file_size) {
  if (file_size < 8) return error("{}: {} bytes is too short for a safetensors file", url, file_size);
  DF_ASSIGN(HttpReply a, http.get(url, std::make_pair(uint64_t(0), uint64_t(7)), 1 << 20));
  if (a.status != 206 && a.status != 200) return Status::error(describe_http_failure(url, a));
  if (a.body.size() < 8) return error("GET {} (bytes 0-7): {} bytes", url, a.body.size());
  const uint64_t hlen = le64(a.body.substr(0, 8));
  if (hlen == 0 || hlen > kMaxHeader || 8 + hlen > file_size)
    return error("{}: header length {} does not fit the file ({} bytes)", url, hlen, file_size);
  DF_ASSIGN(HttpReply h, http.get(url, std::make_pair(uint64_t(8), 8 + hlen - 1), kMaxHeader + 1));
  if (h.status != 206) return Status::error(describe_http_failure(url, h) + " (the safetensors header by Range)");
  if (h.body.size() != hlen) return error("GET {}: header of {} bytes, {} arrived", url, hlen, h.body.size());
  return h.body;
}

Result<std::string> local_header(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error("{}: cannot open: {}", path, std::strerror(errno));
  FdCloser closer(fd);
  std::string n(8, '\0');
  if (::pread(fd, n.data(), 8, 0) != 8) return error("{}: too short for a safetensors file", path);
  const uint64_t hlen = le64(n);
  struct stat st {};
  ::fstat(fd, &st);
  if (hlen == 0 || hlen > kMaxHeader || 8 + hlen > uint64_t(st.st_size))
    return error("{}: header length {} does not fit the file", path, hlen);
  std::string h(hlen, '\0');
  if (::pread(fd, h.data(), hlen, 8) != ssize_t(hlen)) return error("{}: cannot read the header", path);
  return h;
}

struct Device {
  dev_t dev = 0;
  std::string path;   // a directory on it, for statvfs
  std::string label;  // what is stored there
  uint64_t need = 0;
};

Status check_space(const SetupOptions& o, std::vector<Device> devices) {
  // Merge what shares one file system.
  std::vector<Device> merged;
  for (auto& d : devices) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const Device& m) { return m.dev == d.dev; });
    if (it == merged.end()) {
      merged.push_back(d);
    } else {
      it->need += d.need;
      it->label += " + " + d.label;
    }
  }
  std::string missing;
  for (const auto& d : merged) {
    struct statvfs sv {};
    if (::statvfs(d.path.c_str(), &sv) != 0) return error("{}: cannot read free space: {}", d.path, std::strerror(errno));
    const uint64_t free_bytes = uint64_t(sv.f_bavail) * uint64_t(sv.f_frsize);
    const uint64_t want = d.need + d.need / 100 + (64ull << 20);  // 1% and 64 MiB of slack
    say(o, fmt::format("disk {}: {} needed ({}), {} free{}", d.path, gb(want), d.label, gb(free_bytes),
                       want > free_bytes ? "  NOT ENOUGH" : ""));
    if (want > free_bytes)
      missing += fmt::format("{}{} needs {} ({}) but has {} free", missing.empty() ? "" : "; ", d.path, gb(want),
                             d.label, gb(free_bytes));
  }
  if (!missing.empty())
    return error("not enough disk space: {} (nothing was downloaded; free space or choose other --out/--drive "
                 "directories; --no-space-check skips this check)",
                 missing);
  return {};
}

dev_t device_of(const std::string& path) {
  struct stat st {};
  fs::path p = path;
  while (::stat(p.c_str(), &st) != 0 && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  return st.st_dev;
}

std::string existing_dir(const std::string& path) {
  fs::path p = path;
  std::error_code ec;
  while (!fs::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  return p.string();
}

// Needs per file system: the store's spine and the download on --out's, the
// expert packs split over the drives by their given rates (equal otherwise),
// with the replicas prepare will add.
Status plan_space(const SetupOptions& o, const CheckpointSizes& sz, uint64_t to_download) {
  DF_ASSIGN(auto drives, parse_drive_args(o.prepare.drives));
  std::vector<Device> devices;
  const std::string out = existing_dir(fs::absolute(o.prepare.out_dir).string());
  devices.push_back({device_of(out), out,
                     to_download ? fmt::format("spine and download of {}", gb(to_download)) : "spine",
                     (sz.tensors - sz.expert_bytes) + (sz.total - sz.tensors) + to_download});
  const uint64_t per_expert = sz.experts ? sz.expert_bytes / sz.experts : 0;
  const uint64_t span = (per_expert + kSpan - 1) / kSpan * kSpan;
  uint64_t copies = sz.experts;
  if (o.prepare.replicate_hot == "all") {
    copies *= 2;
  } else if (!o.prepare.replicate_hot.empty()) {
    try {
      copies += std::min<uint64_t>(std::stoull(o.prepare.replicate_hot), sz.experts);
    } catch (const std::exception&) {
      // prepare names the bad value
    }
  }
  double rate_sum = 0;
  bool all_given = true;
  for (const auto& [root, rate] : drives) rate_sum += rate, all_given = all_given && rate > 0;
  for (size_t d = 0; d < drives.size(); ++d) {
    const double share = all_given ? drives[d].second / rate_sum : 1.0 / double(drives.size());
    // A drive holds whole spans: round its share up by one span.
    const uint64_t bytes = uint64_t(double(copies) * share + 1) * span;
    devices.push_back({device_of(drives[d].first), drives[d].first, fmt::format("expert packs of drive {}", d), bytes});
  }
  return check_space(o, devices);
}

struct SelectedFiles {
  std::vector<RemoteFile> files;  // top-level files: the checkpoint
  size_t skipped = 0;             // in subfolders (documentation, images)
};

Result<SelectedFiles> select_files(const std::vector<RemoteFile>& all, const std::string& what) {
  SelectedFiles s;
  bool config = false, shard = false;
  for (const auto& f : all) {
    if (f.path.find('/') != std::string::npos) {
      ++s.skipped;
      continue;
    }
    config = config || f.path == "config.json";
    shard = shard || f.path.ends_with(".safetensors");
    s.files.push_back(f);
  }
  if (!config) return error("{}: has no config.json at its top level: not a model checkpoint", what);
  if (!shard) return error("{}: has no .safetensors file at its top level: not a checkpoint in the Hub's layout", what);
  // Small files first (a config error shows before gigabytes move), then by name.
  std::sort(s.files.begin(), s.files.end(), [](const RemoteFile& a, const RemoteFile& b) {
    return a.size != b.size ? a.size < b.size : a.path < b.path;
  });
  return s;
}

json listing_json(const std::vector<RemoteFile>& files) {
  json j = json::array();
  for (const auto& f : files) {
    json e = {{"type", "file"}, {"path", f.path}, {"size", f.size}};
    if (!f.sha256.empty())
      e["lfs"] = {{"oid", f.sha256}, {"size", f.size}};
    else
      e["oid"] = f.git_oid;
    j.push_back(e);
  }
  return j;
}

// A shard's placeholder: its header at the start, a hole to its full size.
Status write_placeholder(const std::string& path, const std::string& tmp, const std::string& header, uint64_t size) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot create: {}", tmp, std::strerror(errno));
  std::string head(8, '\0');
  for (int i = 0; i < 8; ++i) head[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  head += header;
  const bool ok = ::pwrite(fd, head.data(), head.size(), 0) == ssize_t(head.size()) && ::ftruncate(fd, off_t(size)) == 0 &&
                  ::fsync(fd) == 0;
  const int e = errno;
  ::close(fd);
  if (!ok) return error("{}: cannot write the placeholder: {}", tmp, std::strerror(e));
  return rename_durable(tmp, path);
}

// The shards of a streamed setup: downloaded in place into their placeholder
// when prepare first needs one, marked verified; given back by punching a
// hole over the data (the header stays, as Checkpoint::open read it).
class StreamedShards : public ShardSource {
 public:
  StreamedShards(HubApi& api, std::string commit, const std::vector<RemoteFile>& files, std::string ck_dir,
                 std::string state_dir, DownloadOptions d, const SetupOptions& o)
      : api_(api), commit_(std::move(commit)), ck_dir_(std::move(ck_dir)), state_dir_(std::move(state_dir)),
        d_(std::move(d)), o_(o) {
    for (const auto& f : files)
      if (f.path.ends_with(".safetensors")) files_[f.path] = f, ++total_;
  }

  Status ensure(const std::string& shard_path) override {
    DF_ASSIGN(const RemoteFile* f, find(shard_path));
    const std::string mark = state(*f, ".verified");
    std::error_code ec;
    if (fs::exists(mark, ec)) return {};
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t bytes = 0;
    DF_TRY(download_file(api_.file_url(commit_, f->path), *f, {shard_path, state(*f, ".part.json"), ""}, d_,
                         [&](uint64_t n) { bytes += n; }));
    DF_TRY(write_file_atomic(mark, ""));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++fetched_;
    say(o_, fmt::format("{}: {} downloaded and verified in {:.1f} s ({:.0f} MB/s); {} of {} shards this run",
                        f->path, gb(f->size), s, s > 0 ? double(bytes) / s / 1e6 : 0.0, fetched_, total_));
    if (o_.prepare.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.prepare.pause_ms));
    return {};
  }

  // A streamed store's spine: only its tensors' bytes, by Range, into the
  // placeholder (near ranges merged into one request).
  Status ensure_ranges(const std::string& shard_path, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override {
    DF_ASSIGN(const RemoteFile* f, find(shard_path));
    std::error_code ec;
    if (fs::exists(state(*f, ".verified"), ec)) return {};
    std::vector<std::pair<uint64_t, uint64_t>> rs;  // [begin, end)
    for (const auto& [off, n] : ranges)
      if (n) rs.push_back({off, off + n});
    std::sort(rs.begin(), rs.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& r : rs) {
      if (!merged.empty() && r.first <= merged.back().second + (1u << 20))
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    const int fd = ::open(shard_path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return error("{}: cannot open: {}", shard_path, std::strerror(errno));
    FdCloser closer(fd);
    const std::string url = api_.file_url(commit_, f->path);
    HttpClient http(d_.token);
    uint64_t bytes = 0;
    for (const auto& [b, e] : merged) {
      uint64_t got = 0;
      Status st;
      for (int attempt = 1; attempt <= d_.retries + 1; ++attempt) {
        st = http.get_range(url, b + got, e - b - got, fd, &got, [&](uint64_t n) { bytes += n; });
        if (st.ok()) break;
        const long code = http.last_status();
        if (code >= 400 && code < 500 && code != 408 && code != 429) break;
        if (d_.log) d_.log(fmt::format("{}: {}; retrying (attempt {} of {})", f->path, st.message(), attempt + 1, d_.retries + 1));
        std::this_thread::sleep_for(std::chrono::milliseconds(250 * attempt));
      }
      DF_TRY(st);
    }
    if (::fdatasync(fd) != 0) return error("{}: cannot sync: {}", shard_path, std::strerror(errno));
    say(o_, fmt::format("{}: {} of spine tensors fetched by range ({} requests)", f->path, gb(bytes), merged.size()));
    return {};
  }

  Status release(const std::string& shard_path) override {
    DF_ASSIGN(const RemoteFile* f, find(shard_path));
    // Unmarked first: a hole is never taken for verified data.
    std::error_code ec;
    fs::remove(state(*f, ".verified"), ec);
    DF_TRY(fsync_path(state_dir_));
    const int fd = ::open(shard_path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return error("{}: cannot open: {}", shard_path, std::strerror(errno));
    std::string n(8, '\0');
    const bool read_ok = ::pread(fd, n.data(), 8, 0) == 8;
    const uint64_t keep = read_ok ? 8 + le64(n) : 0;
    int rc = 0;
    if (read_ok && keep < f->size)
      rc = ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(keep), off_t(f->size - keep));
    const int e = errno;
    ::close(fd);
    if (rc != 0 && !warned_) {
      warned_ = true;
      std::fprintf(stderr, "setup: warning: %s: cannot free a used shard's space (%s): shards stay on disk until "
                   "the store is complete\n", shard_path.c_str(), std::strerror(e));
    }
    return {};
  }

 private:
  Result<const RemoteFile*> find(const std::string& shard_path) {
    const std::string name = fs::path(shard_path).filename().string();
    auto it = files_.find(name);
    if (it == files_.end() || fs::path(shard_path).parent_path() != fs::path(ck_dir_))
      return error("{}: not a shard of this setup", shard_path);
    return &it->second;
  }
  std::string state(const RemoteFile& f, const char* ext) const {
    return (fs::path(state_dir_) / f.path).string() + ext;
  }
  HubApi& api_;
  std::string commit_, ck_dir_, state_dir_;
  DownloadOptions d_;
  const SetupOptions& o_;
  std::map<std::string, RemoteFile> files_;
  size_t total_ = 0, fetched_ = 0;
  bool warned_ = false;
};

}  // namespace

Result<CheckpointSizes> sizes_from_header(const std::string& header_json, const std::string& what) {
  CheckpointSizes s;
  json j;
  try {
    j = json::parse(header_json);
  } catch (const std::exception& e) {
    return error("{}: the safetensors header is not JSON ({})", what, e.what());
  }
  if (!j.is_object()) return error("{}: the safetensors header is not a JSON object", what);
  for (auto& [name, t] : j.items()) {
    if (name == "__metadata__") continue;
    if (!t.is_object() || !t.contains("data_offsets") || !t["data_offsets"].is_array() || t["data_offsets"].size() != 2 ||
        !t["data_offsets"][0].is_number_unsigned() || !t["data_offsets"][1].is_number_unsigned())
      return error("{}: tensor {} has no [begin, end] data_offsets", what, name);
    const uint64_t a = t["data_offsets"][0].get<uint64_t>(), b = t["data_offsets"][1].get<uint64_t>();
    if (b < a) return error("{}: tensor {} ends before it begins", what, name);
    s.tensors += b - a;
    if (name.find(".experts.") != std::string::npos) {
      s.expert_bytes += b - a;
      if (name.ends_with(".w1.weight_packed")) ++s.experts;
    }
  }
  return s;
}

namespace {

// `setup --resume --out STORE`: the streamed store's own records name the
// repository, commit and drives; the rest is the streamed setup's path with
// prepare completing the store in place (StreamMode::Fill).
Status resume_store(const SetupOptions& o, const std::string& out) {
  if (!o.repo.empty() || !o.from_dir.empty() || o.stream || o.keep_checkpoint || !o.prepare.drives.empty())
    return error("--resume takes only --out (and --token-file, --connections, --chunk-mb): the streamed store "
                 "records its repository and drives");
  if (!fs::exists(fs::path(out) / kManifestName)) return error("{}: no manifest: not a store made by `setup --stream`", out);
  DF_ASSIGN(Manifest m, Manifest::load(out));
  if (!m.stream) {
    std::error_code ec;
    fs::remove_all(fs::path(out) / ".setup", ec);  // left by a resume killed after its manifest was written
    say(o, fmt::format("{}: store is already complete (nothing to resume)", out));
    return {};
  }
  const std::string source_rec = (fs::path(out) / ".setup" / "source.json").string();
  auto text = read_file(source_rec);
  if (!text.ok()) return text.status().with_context("the streamed store's setup record");
  json src;
  try {
    src = json::parse(*text);
  } catch (const std::exception&) {
    return error("{}: unreadable", source_rec);
  }
  SetupOptions r = o;
  r.resume = true;
  r.space_check = false;  // the store is in place; only the shards in use add to it
  r.endpoint = src.value("endpoint", "");
  r.repo = src.value("repo", "") + "@" + src.value("revision", "main");
  if (r.token_file.empty()) r.token_file = m.stream->token_file;
  r.prepare.out_dir = out;
  r.prepare.spine = m.spine_dtype;
  r.prepare.replicate_hot.clear();
  r.prepare.replicas_from.clear();
  r.prepare.drives.clear();
  for (const auto& d : m.drives) r.prepare.drives.push_back(fmt::format("{}:{}", d.root, d.rate_mb_s));
  say(o, fmt::format("{}: completing the streamed store from {}/{}@{}", out, m.stream->endpoint, m.stream->repo,
                     m.stream->commit));
  return setup_store(r);
}

}  // namespace

Status setup_store(const SetupOptions& o) {
  std::error_code ec;
  const std::string out = fs::absolute(o.prepare.out_dir, ec).lexically_normal().string();
  const std::string staging = (fs::path(out) / ".setup").string();
  if (o.resume && o.repo.empty()) return resume_store(o, out);
  if (o.repo.empty() == o.from_dir.empty()) return error("give exactly one of --repo ORG/NAME[@REVISION] and --from DIR");
  if (o.connections < 1 || o.connections > 64) return error("--connections {}: expected 1..64", o.connections);
  if (o.chunk_mb < 1 || o.chunk_mb > 4096) return error("--chunk-mb {}: expected 1..4096", o.chunk_mb);
  DF_TRY(parse_drive_args(o.prepare.drives).status());
  if (!o.resume && fs::exists(fs::path(out) / kManifestName)) {
    DF_ASSIGN(Manifest m, Manifest::load(out));
    if (m.stream) {
      say(o, fmt::format("{}: is a streamed store (its experts are fetched on first use); `deltafin setup --resume "
                         "--out {}` completes it",
                         out, out));
      return {};
    }
    if (!o.keep_checkpoint) fs::remove_all(staging, ec);  // left by a run killed after the manifest was written
    say(o, fmt::format("{}: store is already complete (remove it to set up again)", out));
    return {};
  }
  if (o.stream && !o.from_dir.empty()) return error("--stream needs --repo: a local snapshot is prepared in place");
  if (o.stream && o.keep_checkpoint) return error("--stream and --keep-checkpoint exclude each other");

  // A local snapshot: prepare it in place (nothing to download or delete).
  if (!o.from_dir.empty()) {
    PrepareOptions p = o.prepare;
    p.model_dir = o.from_dir;
    DF_TRY(check_prepare_paths(p));
    if (o.space_check) {
      CheckpointSizes sz;
      for (const auto& e : fs::directory_iterator(o.from_dir, ec)) {
        if (!e.is_regular_file()) continue;
        sz.total += e.file_size();
        if (e.path().extension() != ".safetensors") continue;
        DF_ASSIGN(std::string h, local_header(e.path().string()));
        DF_ASSIGN(CheckpointSizes s, sizes_from_header(h, e.path().string()));
        sz.tensors += s.tensors, sz.expert_bytes += s.expert_bytes, sz.experts += s.experts;
      }
      if (ec) return error("--from {}: cannot list: {}", o.from_dir, ec.message());
      DF_TRY(plan_space(o, sz, 0));
    }
    return prepare_store(p);
  }

  DF_ASSIGN(RepoSpec spec, parse_repo_spec(o.repo));
  DF_ASSIGN(std::string token, read_token_file(o.token_file));
  HubApi api(o.endpoint, spec, token);
  const std::string what = fmt::format("{} at {}", spec.repo, api.endpoint());

  // The source is pinned at the first run: a rerun continues the same commit.
  // Nothing is written before the repository answered (a refused run leaves nothing).
  const std::string source_rec = (fs::path(staging) / "source.json").string();
  const std::string listing_rec = (fs::path(staging) / "listing.json").string();
  // Streamed (the default): shards are downloaded as prepare needs them and
  // freed after; --keep-checkpoint downloads the whole checkpoint first.
  const bool streamed = !o.keep_checkpoint;
  json source = {{"endpoint", api.endpoint()}, {"repo", spec.repo}, {"revision", spec.revision}, {"streamed", streamed}};
  // --stream is recorded too (a --resume of it continues with the same record).
  if (o.stream || o.resume) source["stream"] = true;
  std::string commit;
  if (auto prev = read_file(source_rec); prev.ok()) {
    json p;
    try {
      p = json::parse(*prev);
    } catch (const std::exception&) {
      return error("{}: unreadable; delete {} to start over", source_rec, staging);
    }
    commit = p.value("commit", "");
    p.erase("commit");
    if (p != source)
      return error("{}: holds an interrupted setup of {} (rerun with the same --repo, --endpoint, --stream and "
                   "--keep-checkpoint, or delete {})",
                   out, p.dump(), staging);
  }
  std::vector<RemoteFile> listed;
  if (commit.empty()) {
    DF_ASSIGN(commit, api.resolve_commit());
    auto l = api.list_files(commit);
    if (!l.ok()) return l.status();
    listed = std::move(*l);
    DF_TRY(select_files(listed, what).status());
    fs::create_directories(staging, ec);
    if (ec) return error("{}: cannot create: {}", staging, ec.message());
    DF_TRY(write_file_atomic(listing_rec, listing_json(listed).dump() + "\n"));
    source["commit"] = commit;
    DF_TRY(write_file_atomic(source_rec, source.dump() + "\n"));
  } else {
    DF_ASSIGN(std::string text, read_file(listing_rec));
    auto l = parse_tree_listing(text);
    if (!l.ok()) return l.status().with_context(listing_rec + " (delete " + staging + " to start over)");
    listed = std::move(*l);
  }
  say(o, fmt::format("{} @ {} (commit {})", spec.repo, spec.revision, commit));
  DF_ASSIGN(SelectedFiles sel, select_files(listed, what));
  if (sel.skipped) say(o, fmt::format("{} files in subfolders are not part of the checkpoint: skipped", sel.skipped));

  const std::string ck_dir = (fs::path(staging) / "checkpoint").string();
  const std::string state_dir = (fs::path(staging) / "state").string();
  for (const auto& dir : {ck_dir, state_dir}) {
    fs::create_directories(dir, ec);
    if (ec) return error("{}: cannot create: {}", dir, ec.message());
  }
  const uint64_t chunk = o.chunk_mb << 20;
  auto ck_path = [&](const RemoteFile& f) { return (fs::path(ck_dir) / f.path).string(); };
  auto state_path = [&](const RemoteFile& f, const char* ext) { return (fs::path(state_dir) / f.path).string() + ext; };
  auto complete = [&](const RemoteFile& f) {
    // A shard of a streamed setup is a placeholder until its ".verified" mark.
    if (streamed && f.path.ends_with(".safetensors")) return fs::exists(state_path(f, ".verified"), ec);
    return fs::is_regular_file(ck_path(f), ec) && fs::file_size(ck_path(f), ec) == f.size;
  };
  CheckpointSizes sz;
  uint64_t already = 0, largest[3] = {0, 0, 0};
  std::map<std::string, std::string> headers;  // shard -> its safetensors header (placeholders)
  {
    HttpClient http(token);
    for (const auto& f : sel.files) {
      sz.total += f.size;
      already += complete(f) ? f.size : recorded_bytes(f, state_path(f, ".part.json"), chunk);
      if (!f.path.ends_with(".safetensors")) continue;
      uint64_t v = f.size;  // kept in descending order
      for (auto& l : largest)
        if (v > l) std::swap(v, l);
      const bool local = fs::exists(ck_path(f), ec);  // a complete file or a placeholder: its header is there
      if (!o.space_check && (!streamed || local)) continue;
      auto h = local ? local_header(ck_path(f)) : remote_header(http, api.file_url(commit, f.path), f.size);
      if (!h.ok()) return h.status();
      DF_ASSIGN(CheckpointSizes s, sizes_from_header(*h, f.path));
      sz.tensors += s.tensors, sz.expert_bytes += s.expert_bytes, sz.experts += s.experts;
      if (!local) headers[f.path] = std::move(*h);
    }
  }
  say(o, fmt::format("{} files, {} ({} already here); routed experts {} in {} experts{}", sel.files.size(),
                     gb(sz.total), gb(already), gb(sz.expert_bytes), sz.experts,
                     streamed ? "; shards are downloaded as the store needs them and deleted after" : ""));
  if (o.space_check) {
    // Streamed, --out's file system holds the shards in use: bounded here by the three largest.
    const uint64_t staged = streamed ? (sz.total - sz.tensors) + largest[0] + largest[1] + largest[2] : sz.total - already;
    DF_TRY(plan_space(o, sz, staged));
  }

  DownloadOptions d;
  d.connections = o.connections;
  d.chunk_bytes = chunk;
  d.token = token;
  d.log = [&](const std::string& line) { std::fprintf(stderr, "setup: %s\n", line.c_str()); };
  std::map<std::string, std::string> sha256;
  // The small files and, unless streamed, the shards: downloaded now.
  {
    uint64_t total = 0, have = 0;
    for (const auto& f : sel.files)
      if (!streamed || !f.path.ends_with(".safetensors")) {
        total += f.size;
        have += complete(f) ? f.size : recorded_bytes(f, state_path(f, ".part.json"), chunk);
      }
    Progress prog(fmt::format("downloading {}", spec.repo), total, o.prepare.quiet);
    prog.add(have);
    std::vector<DownloadJob> jobs;
    for (const auto& f : sel.files)
      if (!(streamed && f.path.ends_with(".safetensors")) && !complete(f))
        jobs.push_back({api.file_url(commit, f.path), &f,
                        {state_path(f, ".part"), state_path(f, ".part.json"), ck_path(f)}});
    DF_TRY(download_files(jobs, d, [&](uint64_t n) { prog.add(n); }, [&] {
      if (o.prepare.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.prepare.pause_ms));
    }));
    prog.finish();
  }
  for (const auto& f : sel.files) {
    // prepare's identity is SHA-256 per file: the listing's for LFS files
    // (verified on download), computed here for the small ones (their
    // listing gives a git SHA-1).
    if (!f.sha256.empty()) {
      sha256[f.path] = f.sha256;
    } else {
      DF_ASSIGN(sha256[f.path], sha256_file(ck_path(f)));
    }
  }
  // Streamed: every shard a placeholder (its header, then a hole) that
  // Checkpoint::open reads; StreamedShards fills it when prepare asks.
  if (streamed)
    for (const auto& f : sel.files)
      if (f.path.ends_with(".safetensors") && !fs::exists(ck_path(f), ec))
        DF_TRY(write_placeholder(ck_path(f), state_path(f, ".placeholder"), headers.at(f.path), f.size));
  StreamedShards shards(api, commit, sel.files, ck_dir, state_dir, d, o);

  PrepareOptions p = o.prepare;
  p.model_dir = ck_dir;
  p.source_label = fmt::format("{}/{}@{}", api.endpoint(), spec.repo, commit);
  p.known_sha256 = sha256;
  if (streamed) p.shards = &shards;
  if (o.stream) {
    p.stream_mode = StreamMode::Stream;
    std::string token_file;
    if (!o.token_file.empty()) token_file = fs::absolute(o.token_file).lexically_normal().string();
    p.stream_source = StreamSource{api.endpoint(), spec.repo, commit, token_file};
  } else if (o.resume) {
    p.stream_mode = StreamMode::Fill;
  }
  DF_TRY(prepare_store(p));
  if (o.stream) {
    // The placeholders' headers locate every expert for `run`; the records
    // let `setup --resume` continue the same commit.
    say(o, fmt::format("{}: ready to run; each expert is fetched from {} on its first use; `deltafin setup --resume "
                       "--out {}` downloads and verifies the rest",
                       out, api.endpoint(), out));
    return {};
  }
  if (!o.keep_checkpoint) {
    fs::remove_all(staging, ec);
    if (ec) return error("{}: cannot remove the downloaded checkpoint: {}", staging, ec.message());
    say(o, fmt::format("removed the downloaded checkpoint ({})", staging));
  } else {
    say(o, fmt::format("the downloaded checkpoint stays in {} (--keep-checkpoint)", ck_dir));
  }
  return {};
}

}  // namespace deltafin::hub
