#include "store/pack_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <future>
#include <memory>

#include "core/fd_closer.h"
#include "store/fs_util.h"
#include "store/manifest.h"

namespace deltafin {

namespace {

constexpr uint64_t kBatchBytes = 8 << 20;  // per write(): large enough to stream, small enough to overlap

Status write_all(int fd, const std::string& path, const uint8_t* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && (::fcntl(fd, F_GETFL) & O_DIRECT)) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT);  // the file system refuses this direct write
      continue;
    }
    if (w <= 0) return error("{}: write failed: {}", path, std::strerror(errno));
    done += size_t(w);
  }
  return {};
}

}  // namespace

Result<std::vector<Hash128>> write_pack(const std::string& path, int moe_index, const std::vector<int>& experts,
                                        const ExpertPayloads& src, uint64_t span, Progress& prog) {
  const uint64_t payload = src.expert_bytes();
  const size_t n = experts.size(), per_batch = size_t(std::max<uint64_t>(1, kBatchBytes / span));
  const size_t batches = (n + per_batch - 1) / per_batch;
  std::vector<Hash128> sums(n);
  // Aligned for O_DIRECT: spans are 4 KiB multiples, so every write is too.
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> bufs[2];
  for (auto& b : bufs) {
    b.reset(static_cast<uint8_t*>(std::aligned_alloc(kSpanAlign, std::max<size_t>(1, std::min(per_batch, n)) * span)));
    if (!b) return error("{}: cannot allocate {} bytes for the pack writer", path, std::min(per_batch, n) * span);
  }
  auto count_of = [&](size_t b) { return std::min(per_batch, n - b * per_batch); };
  auto fill_batch = [&](size_t b) -> Status {
    uint8_t* base = bufs[b % 2].get();
    for (size_t i = 0; i < count_of(b); ++i) {
      const size_t idx = b * per_batch + i;
      std::span<uint8_t> s(base + i * span, span);
      DF_TRY(src.fill(moe_index, experts[idx], s.first(payload)));
      std::fill(s.begin() + ptrdiff_t(payload), s.end(), uint8_t(0));
      sums[idx] = xxh3_128(s.first(payload));
    }
    return {};
  };

  const std::string tmp = path + ".tmp";
  // O_DIRECT: the packs are written once and read back later with O_DIRECT, so
  // skip the page cache (steadier than buffered writeback here); plain writes
  // where the file system refuses it.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot create: {}", tmp, std::strerror(errno));
  Status st;
  std::future<Status> next;
  if (batches > 0) next = std::async(std::launch::async, fill_batch, size_t(0));
  for (size_t b = 0; b < batches && st.ok(); ++b) {
    st = next.get();
    if (!st.ok()) break;
    // Buffer b % 2 is ours until the next loop turn; the filler takes the other.
    if (b + 1 < batches) next = std::async(std::launch::async, fill_batch, b + 1);
    st = write_all(fd, tmp, bufs[b % 2].get(), count_of(b) * span);
    if (st.ok()) prog.add(count_of(b) * span);
  }
  if (next.valid()) next.wait();  // a fill still running owns a buffer
  if (st.ok() && ::fsync(fd) != 0) st = error("{}: fsync failed: {}", tmp, std::strerror(errno));
  ::close(fd);
  if (!st.ok()) return st;
  DF_TRY(rename_durable(tmp, path));
  return sums;
}

Status create_sparse_pack(const std::string& path, uint64_t bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("{}: cannot create: {}", tmp, std::strerror(errno));
  const bool ok = ::ftruncate(fd, off_t(bytes)) == 0 && ::fsync(fd) == 0;
  const int e = errno;
  ::close(fd);
  if (!ok) return error("{}: cannot size to {} bytes: {}", tmp, bytes, std::strerror(e));
  return rename_durable(tmp, path);
}

Result<std::vector<Hash128>> fill_pack_in_place(const std::string& path, int moe_index, const std::vector<int>& experts,
                                                const ExpertPayloads& src, uint64_t span, Progress& prog) {
  const uint64_t payload = src.expert_bytes();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return error("{}: cannot open: {}", path, std::strerror(errno));
  FdCloser closer(fd);
  std::vector<uint8_t> buf(span, 0);
  std::vector<Hash128> sums(experts.size());
  for (size_t i = 0; i < experts.size(); ++i) {
    DF_TRY(src.fill(moe_index, experts[i], std::span<uint8_t>(buf).first(payload)));
    sums[i] = xxh3_128(std::span<const uint8_t>(buf).first(payload));
    uint64_t put = 0;
    while (put < span) {
      const ssize_t w = ::pwrite(fd, buf.data() + put, span - put, off_t(i * span + put));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return error("{}: write failed at offset {}: {}", path, i * span + put, std::strerror(errno));
      put += uint64_t(w);
    }
    prog.add(span);
  }
  if (::fdatasync(fd) != 0) return error("{}: fdatasync failed: {}", path, std::strerror(errno));
  return sums;
}

}  // namespace deltafin
