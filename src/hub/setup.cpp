#include "hub/setup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/fd_closer.h"
#include "hub/disk_plan.h"
#include "hub/download.h"
#include "hub/hub_api.h"
#include "hub/retry.h"
#include "hub/streamed_shards.h"
#include "io/checksum.h"
#include "store/fs_util.h"
#include "store/manifest.h"
#include "store/progress.h"

namespace deltafin::hub {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

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

// The header of a remote shard, by two Range requests (its length, then its
// JSON), each retried by the policy.
Result<std::string> remote_header(HttpClient& http, const std::string& url, uint64_t file_size, const RetryPolicy& p,
                                  const std::function<void(const std::string&)>& log) {
  if (file_size < 8) return error("{}: {} bytes is too short for a safetensors file", url, file_size);
  DF_ASSIGN(HttpReply a, get_with_retries(http, url, std::make_pair(uint64_t(0), uint64_t(7)), 1 << 20, p, log));
  if (a.status != 206 && a.status != 200) return Status::error(describe_http_failure(url, a));
  if (a.body.size() < 8) return error("GET {} (bytes 0-7): {} bytes", url, a.body.size());
  const uint64_t hlen = le64(a.body.substr(0, 8));
  if (hlen == 0 || hlen > kMaxHeader || 8 + hlen > file_size)
    return error("{}: header length {} does not fit the file ({} bytes)", url, hlen, file_size);
  DF_ASSIGN(HttpReply h, get_with_retries(http, url, std::make_pair(uint64_t(8), 8 + hlen - 1), kMaxHeader + 1, p, log));
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
      // One tensor per expert counts it: K3's packed gate, the Hub families' gate weight.
      if (name.ends_with(".w1.weight_packed") || name.ends_with(".gate_proj.weight")) ++s.experts;
    }
  }
  return s;
}


namespace {

// A word of a shell command, quoted when it needs to be.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./:@%+=,-").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command that continues this setup where it stopped: the options the
// records pin (repository, endpoint, mode), the drives, and what must match
// for the records to be reused (the chunk size) or was asked for.
std::string resume_command(const SetupOptions& o, const std::string& out) {
  std::string c = "deltafin setup";
  auto add = [&](const char* opt, const std::string& v) { c += fmt::format(" {} {}", opt, shell_word(v)); };
  // Paths absolute, so that the command works from any directory ("DIR:MBPS" keeps its rate).
  auto path = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
  if (o.resume) {
    add("--out", out);
  } else {
    add("--repo", o.repo);
    add("--endpoint", o.endpoint);
    add("--out", out);
    for (const auto& d : o.prepare.drives) add("--drive", path(d));
    if (o.stream) c += " --stream";
    if (o.keep_checkpoint) c += " --keep-checkpoint";
    if (!o.prepare.replicate_hot.empty()) add("--replicate-hot", o.prepare.replicate_hot);
    if (!o.prepare.replicas_from.empty()) add("--replicas-from", path(o.prepare.replicas_from));
    if (!o.prepare.spine.empty() && o.prepare.spine != "bf16") add("--spine", o.prepare.spine);
  }
  if (!o.token_file.empty()) add("--token-file", path(o.token_file));
  const SetupOptions def;
  if (o.chunk_mb != def.chunk_mb) add("--chunk-mb", std::to_string(o.chunk_mb));
  if (o.connections != def.connections) add("--connections", std::to_string(o.connections));
  if (o.retry.retries != def.retry.retries) add("--retries", std::to_string(o.retry.retries));
  if (o.retry.stall_timeout_s != def.retry.stall_timeout_s)
    add("--stall-timeout", std::to_string(o.retry.stall_timeout_s));
  if (o.retry.backoff_ms != def.retry.backoff_ms) add("--retry-backoff-ms", std::to_string(o.retry.backoff_ms));
  if (o.resume) return c.replace(0, std::string("deltafin setup").size(), "deltafin setup --resume");
  return c;
}

// `setup --resume --out STORE`: the streamed store's own records name the
// repository, commit and drives; the rest is the streamed setup's path with
// prepare completing the store in place (StreamMode::Fill).
Status resume_store(const SetupOptions& o, const std::string& out) {
  if (!o.repo.empty() || !o.from_dir.empty() || o.stream || o.keep_checkpoint || !o.prepare.drives.empty())
    return error("--resume takes only --out (and --token-file, --connections, --chunk-mb, --retries, --stall-timeout, "
                 "--retry-backoff-ms): the streamed store records its repository and drives");
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

// Step 1: the options alone, before anything is read or written.
Status check_options(const SetupOptions& o) {
  if (o.repo.empty() == o.from_dir.empty()) return error("give exactly one of --repo ORG/NAME[@REVISION] and --from DIR");
  if (o.connections < 1 || o.connections > 64) return error("--connections {}: expected 1..64", o.connections);
  if (o.chunk_mb < 1 || o.chunk_mb > 4096) return error("--chunk-mb {}: expected 1..4096", o.chunk_mb);
  DF_TRY(check_retry_policy(o.retry));
  DF_TRY(parse_drive_args(o.prepare.drives).status());
  if (o.stream && !o.from_dir.empty()) return error("--stream needs --repo: a local snapshot is prepared in place");
  if (o.stream && o.keep_checkpoint) return error("--stream and --keep-checkpoint exclude each other");
  return {};
}

// Step 1 too: a store whose manifest exists is complete (or streamed): says
// so and sets *done.
Status check_existing_store(const SetupOptions& o, const std::string& out, const std::string& staging, bool* done) {
  *done = false;
  if (o.resume || !fs::exists(fs::path(out) / kManifestName)) return {};
  *done = true;
  DF_ASSIGN(Manifest m, Manifest::load(out));
  if (m.stream) {
    say(o, fmt::format("{}: is a streamed store (its experts are fetched on first use); `deltafin setup --resume "
                       "--out {}` completes it",
                       out, out));
    return {};
  }
  std::error_code ec;
  if (!o.keep_checkpoint) fs::remove_all(staging, ec);  // left by a run killed after the manifest was written
  say(o, fmt::format("{}: store is already complete (remove it to set up again)", out));
  return {};
}

// --from: a local snapshot, prepared in place (nothing to download or delete).
Status setup_from_snapshot(const SetupOptions& o) {
  PrepareOptions p = o.prepare;
  p.model_dir = o.from_dir;
  DF_TRY(check_prepare_paths(p));
  if (o.space_check) {
    std::error_code ec;
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

// --repo: one install from a repository, as named steps that setup_store runs
// in order. Everything after pin_source is resumable by rerunning the same
// command; a network failure there names that command.
class RepoSetup {
 public:
  RepoSetup(const SetupOptions& o, std::string out, RepoSpec spec, std::string token)
      : o_(o), out_(std::move(out)), staging_((fs::path(out_) / ".setup").string()), spec_(std::move(spec)),
        token_(std::move(token)), api_(o.endpoint, spec_, token_),
        what_(fmt::format("{} at {}", spec_.repo, api_.endpoint())), ck_dir_((fs::path(staging_) / "checkpoint").string()),
        state_dir_((fs::path(staging_) / "state").string()), chunk_(o.chunk_mb << 20), streamed_(!o.keep_checkpoint) {
    log_ = [](const std::string& line) { std::fprintf(stderr, "setup: %s\n", line.c_str()); };
    api_.set_retry(o.retry, log_);
    d_.connections = o.connections;
    d_.chunk_bytes = chunk_;
    d_.token = token_;
    d_.retry = o.retry;
    d_.log = log_;
  }

  // Step 2: the commit and the listing. The source is pinned at the first
  // run (STORE/.setup/source.json, listing.json): a rerun continues the same
  // commit. Nothing is written before the repository answered.
  Status pin_source() {
    const std::string source_rec = (fs::path(staging_) / "source.json").string();
    const std::string listing_rec = (fs::path(staging_) / "listing.json").string();
    // Streamed (the default): shards are downloaded as prepare needs them and
    // freed after; --keep-checkpoint downloads the whole checkpoint first.
    json source = {{"endpoint", api_.endpoint()}, {"repo", spec_.repo}, {"revision", spec_.revision}, {"streamed", streamed_}};
    // --stream is recorded too (a --resume of it continues with the same record).
    if (o_.stream || o_.resume) source["stream"] = true;
    if (auto prev = read_file(source_rec); prev.ok()) {
      json p;
      try {
        p = json::parse(*prev);
      } catch (const std::exception&) {
        return error("{}: unreadable; delete {} to start over", source_rec, staging_);
      }
      commit_ = p.value("commit", "");
      p.erase("commit");
      if (p != source)
        return error("{}: holds an interrupted setup of {} (rerun with the same --repo, --endpoint, --stream and "
                     "--keep-checkpoint, or delete {})",
                     out_, p.dump(), staging_);
    }
    if (commit_.empty()) {
      DF_ASSIGN(commit_, api_.resolve_commit());
      DF_ASSIGN(listed_, api_.list_files(commit_));
      DF_TRY(select_files(listed_, what_).status());
      std::error_code ec;
      fs::create_directories(staging_, ec);
      if (ec) return error("{}: cannot create: {}", staging_, ec.message());
      DF_TRY(write_file_atomic(listing_rec, listing_json(listed_).dump() + "\n"));
      source["commit"] = commit_;
      DF_TRY(write_file_atomic(source_rec, source.dump() + "\n"));
    } else {
      DF_ASSIGN(std::string text, read_file(listing_rec));
      auto l = parse_tree_listing(text);
      if (!l.ok()) return l.status().with_context(listing_rec + " (delete " + staging_ + " to start over)");
      listed_ = std::move(*l);
    }
    say(o_, fmt::format("{} @ {} (commit {})", spec_.repo, spec_.revision, commit_));
    DF_ASSIGN(sel_, select_files(listed_, what_));
    if (sel_.skipped) say(o_, fmt::format("{} files in subfolders are not part of the checkpoint: skipped", sel_.skipped));
    for (const auto& dir : {ck_dir_, state_dir_}) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) return error("{}: cannot create: {}", dir, ec.message());
    }
    return {};
  }

  // Steps 3 to 8; a network failure that outlasted its retries names the
  // command that resumes (everything downloaded so far is on disk and recorded).
  Status install() {
    Status st = [&]() -> Status {
      DF_TRY(measure());
      DF_TRY(check_disk());
      DF_TRY(download_now());
      DF_TRY(write_placeholders());
      DF_TRY(run_prepare());
      return {};
    }();
    if (gave_up(st)) return error("{}; `{}` resumes from there", st.message(), resume_command(o_, out_));
    DF_TRY(st);
    return finish();
  }

 private:
  // Step 3: sizes from the listing and each shard's safetensors header (two
  // Range requests, or the local copy's), and what is already here.
  Status measure() {
    HttpClient http(token_);
    http.set_stall_timeout(o_.retry.stall_timeout_s);
    for (const auto& f : sel_.files) {
      sz_.total += f.size;
      already_ += have(f);
      if (!f.path.ends_with(".safetensors")) continue;
      uint64_t v = f.size;  // kept in descending order
      for (auto& l : largest_)
        if (v > l) std::swap(v, l);
      std::error_code ec;
      const bool local = fs::exists(ck_path(f), ec);  // a complete file or a placeholder: its header is there
      if (!o_.space_check && (!streamed_ || local)) continue;
      auto h = local ? local_header(ck_path(f))
                     : remote_header(http, api_.file_url(commit_, f.path), f.size, o_.retry, log_);
      if (!h.ok()) return h.status();
      DF_ASSIGN(CheckpointSizes s, sizes_from_header(*h, f.path));
      sz_.tensors += s.tensors, sz_.expert_bytes += s.expert_bytes, sz_.experts += s.experts;
      if (!local) headers_[f.path] = std::move(*h);
    }
    say(o_, fmt::format("{} files, {} ({} already here); routed experts {} in {} experts{}", sel_.files.size(),
                        gb(sz_.total), gb(already_), gb(sz_.expert_bytes), sz_.experts,
                        streamed_ ? "; shards are downloaded as the store needs them and deleted after" : ""));
    return {};
  }

  // Step 4: disk space per file system, before a byte is downloaded.
  Status check_disk() {
    if (!o_.space_check) return {};
    // Streamed, --out's file system holds the shards in use: bounded here by the three largest.
    const uint64_t staged =
        streamed_ ? (sz_.total - sz_.tensors) + largest_[0] + largest_[1] + largest_[2] : sz_.total - already_;
    return plan_space(o_, sz_, staged);
  }

  // Step 5: the small files and, unless streamed, the shards: downloaded and
  // verified now. Then prepare's identity of every file (SHA-256).
  Status download_now() {
    uint64_t total = 0, done = 0;
    std::vector<DownloadJob> jobs;
    for (const auto& f : sel_.files) {
      if (streamed_ && is_shard(f)) continue;
      total += f.size;
      done += have(f);
      if (!complete(f))
        jobs.push_back({api_.file_url(commit_, f.path), &f,
                        {state_path(f, ".part"), state_path(f, ".part.json"), ck_path(f)}});
    }
    Progress prog(fmt::format("downloading {}", spec_.repo), total, o_.prepare.quiet);
    prog.add(done);
    DF_TRY(download_files(jobs, d_, [&](uint64_t n) { prog.add(n); }, [&] {
      if (o_.prepare.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.prepare.pause_ms));
    }));
    prog.finish();
    // The listing's SHA-256 for LFS files (verified on download), computed
    // here for the small ones (their listing gives a git SHA-1).
    for (const auto& f : sel_.files) {
      if (!f.sha256.empty()) {
        sha256_[f.path] = f.sha256;
      } else {
        DF_ASSIGN(sha256_[f.path], sha256_file(ck_path(f)));
      }
    }
    return {};
  }

  // Step 6, streamed: every shard a placeholder (its header, then a hole)
  // that Checkpoint::open reads; StreamedShards fills it when prepare asks.
  Status write_placeholders() {
    if (!streamed_) return {};
    for (const auto& f : sel_.files) {
      std::error_code ec;
      if (is_shard(f) && !fs::exists(ck_path(f), ec))
        DF_TRY(write_placeholder(ck_path(f), state_path(f, ".placeholder"), headers_.at(f.path), f.size));
    }
    return {};
  }

  // Step 7: prepare writes the store from the checkpoint directory.
  Status run_prepare() {
    StreamedShards shards(api_, commit_, sel_.files, ck_dir_, state_dir_, d_, o_);
    PrepareOptions p = o_.prepare;
    p.model_dir = ck_dir_;
    p.source_label = fmt::format("{}/{}@{}", api_.endpoint(), spec_.repo, commit_);
    p.known_sha256 = sha256_;
    if (streamed_) p.shards = &shards;
    if (o_.stream) {
      p.stream_mode = StreamMode::Stream;
      std::string token_file;
      if (!o_.token_file.empty()) token_file = fs::absolute(o_.token_file).lexically_normal().string();
      p.stream_source = StreamSource{api_.endpoint(), spec_.repo, commit_, token_file};
    } else if (o_.resume) {
      p.stream_mode = StreamMode::Fill;
    }
    return prepare_store(p);
  }

  // Step 8: the download removed (unless kept, or a streamed store needs its headers).
  Status finish() {
    if (o_.stream) {
      // The placeholders' headers locate every expert for `run`; the records
      // let `setup --resume` continue the same commit.
      say(o_, fmt::format("{}: ready to run; each expert is fetched from {} on its first use; `deltafin setup --resume "
                          "--out {}` downloads and verifies the rest",
                          out_, api_.endpoint(), out_));
      return {};
    }
    if (o_.keep_checkpoint) {
      say(o_, fmt::format("the downloaded checkpoint stays in {} (--keep-checkpoint)", ck_dir_));
      return {};
    }
    std::error_code ec;
    fs::remove_all(staging_, ec);
    if (ec) return error("{}: cannot remove the downloaded checkpoint: {}", staging_, ec.message());
    say(o_, fmt::format("removed the downloaded checkpoint ({})", staging_));
    return {};
  }

  static bool is_shard(const RemoteFile& f) { return f.path.ends_with(".safetensors"); }
  std::string ck_path(const RemoteFile& f) const { return (fs::path(ck_dir_) / f.path).string(); }
  std::string state_path(const RemoteFile& f, const char* ext) const {
    return (fs::path(state_dir_) / f.path).string() + ext;
  }
  // A shard of a streamed setup is a placeholder until its ".verified" mark.
  bool complete(const RemoteFile& f) const {
    std::error_code ec;
    if (streamed_ && is_shard(f)) return fs::exists(state_path(f, ".verified"), ec);
    return fs::is_regular_file(ck_path(f), ec) && fs::file_size(ck_path(f), ec) == f.size;
  }
  // Bytes of `f` on disk: all of a complete file, else what its record lists.
  uint64_t have(const RemoteFile& f) const {
    return complete(f) ? f.size : recorded_bytes(f, state_path(f, ".part.json"), chunk_);
  }

  const SetupOptions& o_;
  std::string out_, staging_;
  RepoSpec spec_;
  std::string token_;
  HubApi api_;
  std::string what_, ck_dir_, state_dir_;
  uint64_t chunk_;
  bool streamed_;
  std::function<void(const std::string&)> log_;
  DownloadOptions d_;
  std::string commit_;
  std::vector<RemoteFile> listed_;
  SelectedFiles sel_;
  CheckpointSizes sz_;
  uint64_t already_ = 0, largest_[3] = {0, 0, 0};
  std::map<std::string, std::string> headers_;  // shard -> its safetensors header (placeholders)
  std::map<std::string, std::string> sha256_;
};

}  // namespace

Status setup_store(const SetupOptions& o) {
  std::error_code ec;
  const std::string out = fs::absolute(o.prepare.out_dir, ec).lexically_normal().string();
  const std::string staging = (fs::path(out) / ".setup").string();
  if (o.resume && o.repo.empty()) return resume_store(o, out);
  DF_TRY(check_options(o));
  bool done = false;
  DF_TRY(check_existing_store(o, out, staging, &done));
  if (done) return {};
  if (!o.from_dir.empty()) return setup_from_snapshot(o);
  DF_ASSIGN(RepoSpec spec, parse_repo_spec(o.repo));
  DF_ASSIGN(std::string token, read_token_file(o.token_file));
  RepoSetup run(o, out, std::move(spec), std::move(token));
  DF_TRY(run.pin_source());
  return run.install();
}

}  // namespace deltafin::hub
