#include "hub/download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fd_closer.h"
#include "io/checksum.h"
#include "store/fs_util.h"

namespace deltafin::hub {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string expected_digest(const RemoteFile& f) { return f.sha256.empty() ? "git-sha1:" + f.git_oid : "sha256:" + f.sha256; }

uint64_t chunk_count(uint64_t size, uint64_t chunk) { return size == 0 ? 0 : (size + chunk - 1) / chunk; }

// What a record says is on disk: the finished chunks, and for a chunk whose
// retries ran out, the bytes at its start that were synced before.
struct Progress {
  std::vector<char> done;
  std::map<uint64_t, uint64_t> partial;  // chunk -> bytes at its start

  uint64_t bytes(const RemoteFile& f, uint64_t chunk) const {
    uint64_t n = 0;
    for (size_t i = 0; i < done.size(); ++i)
      if (done[i]) n += std::min(chunk, f.size - i * chunk);
    for (const auto& [i, got] : partial)
      if (i < done.size() && !done[i]) n += got;
    return n;
  }
};

// The progress a record lists, if it describes this very file and chunking.
Progress load_progress(const std::string& record, const RemoteFile& f, uint64_t chunk) {
  const uint64_t n = chunk_count(f.size, chunk);
  Progress none{std::vector<char>(n, 0), {}};
  auto text = read_file(record);
  if (!text.ok()) return none;
  try {
    const json j = json::parse(*text);
    if (j.at("size").get<uint64_t>() != f.size || j.at("digest").get<std::string>() != expected_digest(f) ||
        j.at("chunk").get<uint64_t>() != chunk)
      return none;
    const std::string bits = j.at("done").get<std::string>();
    if (bits.size() != n) return none;
    Progress p{std::vector<char>(n, 0), {}};
    for (size_t i = 0; i < n; ++i) p.done[i] = bits[i] == '1';
    if (j.contains("partial"))
      for (const auto& [k, v] : j.at("partial").items()) {
        const uint64_t i = std::stoull(k), got = v.get<uint64_t>();
        if (i >= n || got >= std::min(chunk, f.size - i * chunk)) return none;
        if (!p.done[i] && got > 0) p.partial[i] = got;
      }
    return p;
  } catch (const std::exception&) {
    return none;  // a damaged record: start the file over
  }
}

Status save_progress(const std::string& record, const RemoteFile& f, uint64_t chunk, const Progress& p) {
  std::string bits(p.done.size(), '0');
  for (size_t i = 0; i < p.done.size(); ++i)
    if (p.done[i]) bits[i] = '1';
  json j = {{"size", f.size}, {"digest", expected_digest(f)}, {"chunk", chunk}, {"done", bits}};
  json partial = json::object();
  for (const auto& [i, got] : p.partial)
    if (!p.done[i] && got > 0) partial[std::to_string(i)] = got;
  if (!partial.empty()) j["partial"] = partial;
  return write_file_atomic(record, j.dump() + "\n");
}

// One pass over the chunks not yet done, each resumed from the bytes it has,
// each failure retried by the policy; the first failure that outlasts its
// retries stops the others. Every chunk that ends short has its bytes synced
// and recorded, so that a rerun asks for the rest only.
Status fetch_chunks(const std::string& url, const RemoteFile& f, int fd, const std::string& record, Progress& prog,
                    const DownloadOptions& o, const std::function<void(uint64_t)>& on_bytes) {
  std::vector<uint64_t> todo;
  for (uint64_t i = 0; i < prog.done.size(); ++i)
    if (!prog.done[i]) todo.push_back(i);
  if (todo.empty()) return {};
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // prog, the record, on_bytes, the log, the first error
  Status first;
  int first_retries = 0;
  bool first_network = false;  // the first failure outlasted its retries (else: a refusal, a local error)
  auto worker = [&] {
    HttpClient http(o.token);
    http.set_stall_timeout(o.retry.stall_timeout_s);
    for (;;) {
      if (stop.load()) return;
      const size_t k = next.fetch_add(1);
      if (k >= todo.size()) return;
      const uint64_t idx = todo[k], off = idx * o.chunk_bytes, len = std::min(o.chunk_bytes, f.size - off);
      uint64_t got = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (auto it = prog.partial.find(idx); it != prog.partial.end()) got = it->second;
      }
      int used = 0;
      Status st = run_with_retries(
          o.retry,
          [&]() -> Attempt {
            Status s = http.get_range(url, off, len, fd, &got, [&](uint64_t n) {
              std::lock_guard<std::mutex> lock(mu);
              on_bytes(n);
            });
            return {s, http.last_retryable(), http.last_retry_after()};
          },
          [&](int n, const Status& why, int64_t wait) {
            if (!o.log) return;
            std::lock_guard<std::mutex> lock(mu);
            o.log(fmt::format("{}: {}; {} from byte {}", f.path, why.message(), retry_note(o.retry, n, wait), off + got));
          },
          &stop, &used);
      if (st.ok() && ::fdatasync(fd) != 0) st = error("{}: fdatasync failed: {}", f.path, std::strerror(errno));
      if (!st.ok() && got > 0 && ::fdatasync(fd) != 0) got = 0;  // unsynced bytes are not recorded
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok()) {
        if (got > 0) {
          prog.partial[idx] = got;
          (void)save_progress(record, f, o.chunk_bytes, prog);  // best effort: the error below is what counts
        }
        if (first.ok() && !stop.load()) first = st, first_retries = used, first_network = http.last_retryable();
        stop = true;
        return;
      }
      prog.done[idx] = 1;
      prog.partial.erase(idx);
      if (Status s = save_progress(record, f, o.chunk_bytes, prog); !s.ok()) {
        if (first.ok()) first = s;
        stop = true;
        return;
      }
    }
  };
  const size_t n = std::min<size_t>(size_t(std::max(1, o.connections)), todo.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (first.ok() || !first_network) return first;
  return error("{}{}; {} of {} bytes of {} are on disk and kept", first.message(), gave_up_note(first_retries),
               prog.bytes(f, o.chunk_bytes), f.size, f.path);
}

}  // namespace

Status verify_remote_file(const RemoteFile& f, const std::string& path) {
  if (!f.sha256.empty()) {
    DF_ASSIGN(std::string got, sha256_file(path));
    if (got != f.sha256)
      return error("{}: checksum mismatch (SHA-256 {} in the listing, {} downloaded)", f.path, f.sha256, got);
  } else {
    DF_ASSIGN(std::string got, git_blob_sha1_file(path));
    if (got != f.git_oid)
      return error("{}: checksum mismatch (git blob SHA-1 {} in the listing, {} downloaded)", f.path, f.git_oid, got);
  }
  return {};
}

uint64_t recorded_bytes(const RemoteFile& f, const std::string& record, uint64_t chunk_bytes) {
  return load_progress(record, f, chunk_bytes).bytes(f, chunk_bytes);
}

namespace {

// The bytes of `f` into t.data (resuming from the record), on disk.
Status fetch_file(const std::string& url, const RemoteFile& f, const DownloadTarget& t, const DownloadOptions& o,
                  const std::function<void(uint64_t)>& on_bytes) {
  if (o.chunk_bytes == 0) return error("download chunk size is 0");
  std::error_code ec;
  for (const auto& p : {t.data, t.record}) {
    fs::create_directories(fs::path(p).parent_path(), ec);
    if (ec) return error("{}: cannot create: {}", fs::path(p).parent_path().string(), ec.message());
  }
  Progress prog = load_progress(t.record, f, o.chunk_bytes);
  if (prog.bytes(f, o.chunk_bytes) == 0) fs::remove(t.record, ec);
  const int fd = ::open(t.data.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot open: {}", t.data, std::strerror(errno));
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) != f.size)
    if (::ftruncate(fd, off_t(f.size)) != 0)
      return error("{}: cannot size to {} bytes: {}", t.data, f.size, std::strerror(errno));
  DF_TRY(fetch_chunks(url, f, fd, t.record, prog, o, on_bytes));
  if (::fsync(fd) != 0) return error("{}: fsync failed: {}", t.data, std::strerror(errno));
  return {};
}

// Checks a fetched file against the listing: verified, it is published
// (renamed, its record removed); damaged, `*damaged` is set and the record
// (and a part file) removed, so that the next fetch starts over. A file
// written in place is overwritten, never replaced.
Status finish_file(const RemoteFile& f, const DownloadTarget& t, bool* damaged) {
  *damaged = false;
  std::error_code ec;
  Status v = verify_remote_file(f, t.data);
  if (v.ok()) {
    if (!t.final_path.empty()) DF_TRY(rename_durable(t.data, t.final_path));
    fs::remove(t.record, ec);
    return {};
  }
  *damaged = true;
  fs::remove(t.record, ec);
  if (!t.final_path.empty()) fs::remove(t.data, ec);
  return v;
}

}  // namespace

Status download_file(const std::string& url, const RemoteFile& f, const DownloadTarget& t, const DownloadOptions& o,
                     const std::function<void(uint64_t)>& on_bytes) {
  for (int round = 0; round < 2; ++round) {
    DF_TRY(fetch_file(url, f, t, o, on_bytes));
    bool damaged = false;
    Status v = finish_file(f, t, &damaged);
    if (v.ok() || !damaged) return v;
    // A damaged transfer (or a damaged part file): fetch the whole file again, once.
    if (round == 1)
      return error("{}, again after a second download from {}: the server does not serve the bytes its listing states",
                   v.message(), url);
    if (o.log) o.log(v.message() + "; fetching the file again");
  }
  return {};
}

Status download_files(const std::vector<DownloadJob>& jobs, const DownloadOptions& o,
                      const std::function<void(uint64_t)>& on_bytes, const std::function<void()>& after_each) {
  // The check of the file before: running, or settled (a damaged file is
  // fetched again, as download_file does, before anything else goes on).
  const DownloadJob* prev = nullptr;
  std::future<Status> check;
  bool damaged = false;
  auto settle = [&]() -> Status {
    if (!prev) return {};
    Status v = check.get();
    const DownloadJob* j = std::exchange(prev, nullptr);
    if (v.ok() || !damaged) return v;
    if (o.log) o.log(v.message() + "; fetching the file again");
    return download_file(j->url, *j->file, j->target, o, on_bytes);
  };
  for (const DownloadJob& j : jobs) {
    Status st = fetch_file(j.url, *j.file, j.target, o, on_bytes);
    Status before = settle();  // also when this fetch failed: the check before is not lost
    DF_TRY(st);
    DF_TRY(before);
    prev = &j;
    check = std::async(std::launch::async, [&j, &damaged] { return finish_file(*j.file, j.target, &damaged); });
    if (after_each) after_each();
  }
  return settle();
}

}  // namespace deltafin::hub
