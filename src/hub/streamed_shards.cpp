#include "hub/streamed_shards.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/fd_closer.h"
#include "hub/retry.h"
#include "store/fs_util.h"

namespace deltafin::hub {

namespace fs = std::filesystem;

namespace {

std::string gb(uint64_t b) { return fmt::format("{:.2f} GB", double(b) / 1e9); }

uint64_t le64(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[size_t(i)]);
  return v;
}

}  // namespace

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

StreamedShards::StreamedShards(HubApi& api, std::string commit, const std::vector<RemoteFile>& files,
                               std::string ck_dir, std::string state_dir, DownloadOptions d, const SetupOptions& o)
    : api_(api), commit_(std::move(commit)), ck_dir_(std::move(ck_dir)), state_dir_(std::move(state_dir)),
      d_(std::move(d)), o_(o) {
  for (const auto& f : files)
    if (f.path.ends_with(".safetensors")) files_[f.path] = f, ++total_;
}

void StreamedShards::say(const std::string& line) const {
  if (!o_.prepare.quiet) std::fprintf(stderr, "setup: %s\n", line.c_str());
}

Status StreamedShards::ensure(const std::string& shard_path) {
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
  say(fmt::format("{}: {} downloaded and verified in {:.1f} s ({:.0f} MB/s); {} of {} shards this run", f->path,
                  gb(f->size), s, s > 0 ? double(bytes) / s / 1e6 : 0.0, fetched_, total_));
  if (o_.prepare.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.prepare.pause_ms));
  return {};
}

Status StreamedShards::ensure_ranges(const std::string& shard_path,
                                     const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
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
  http.set_stall_timeout(d_.retry.stall_timeout_s);
  uint64_t bytes = 0;
  for (const auto& [b, e] : merged) {
    uint64_t got = 0;
    int used = 0;
    Status st = run_with_retries(
        d_.retry,
        [&]() -> Attempt {
          Status s = http.get_range(url, b, e - b, fd, &got, [&](uint64_t n) { bytes += n; });
          return {s, http.last_retryable(), http.last_retry_after()};
        },
        [&](int n, const Status& why, int64_t wait) {
          if (d_.log)
            d_.log(fmt::format("{}: {}; {} from byte {}", f->path, why.message(), retry_note(d_.retry, n, wait), b + got));
        },
        nullptr, &used);
    if (!st.ok() && http.last_retryable())
      return error("{}{}; {} of the range's {} bytes fetched", st.message(), gave_up_note(used), got, e - b);
    DF_TRY(st);
  }
  if (::fdatasync(fd) != 0) return error("{}: cannot sync: {}", shard_path, std::strerror(errno));
  say(fmt::format("{}: {} of spine tensors fetched by range ({} requests)", f->path, gb(bytes), merged.size()));
  return {};
}

Status StreamedShards::release(const std::string& shard_path) {
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

Result<const RemoteFile*> StreamedShards::find(const std::string& shard_path) {
  const std::string name = fs::path(shard_path).filename().string();
  auto it = files_.find(name);
  if (it == files_.end() || fs::path(shard_path).parent_path() != fs::path(ck_dir_))
    return error("{}: not a shard of this setup", shard_path);
  return &it->second;
}

std::string StreamedShards::state(const RemoteFile& f, const char* ext) const {
  return (fs::path(state_dir_) / f.path).string() + ext;
}

}  // namespace deltafin::hub
