#include "store/fetched_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace deltafin {

namespace {

constexpr uint32_t kMagic = 0x31464644;  // "DFF1" little-endian

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

// Layout: magic u32, moe_index u32, expert u32, zero u32, xxh3 hi u64, lo
// u64, then xxh3-128 of those 32 bytes (hi, lo), then 16 zero bytes.
std::vector<uint8_t> FetchedLog::encode(int moe_index, int expert, const Hash128& h) {
  std::vector<uint8_t> r(kFetchedRecordBytes, 0);
  put32(r.data(), kMagic);
  put32(r.data() + 4, uint32_t(moe_index));
  put32(r.data() + 8, uint32_t(expert));
  put64(r.data() + 16, h.hi);
  put64(r.data() + 24, h.lo);
  const Hash128 c = xxh3_128({r.data(), 32});
  put64(r.data() + 32, c.hi);
  put64(r.data() + 40, c.lo);
  return r;
}

Result<std::unique_ptr<FetchedLog>> FetchedLog::open(const std::string& store_dir, int moe_layers, int experts) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(store_dir) / kStreamDirName;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return error("{}: cannot create: {}", dir.string(), ec.message());
  auto log = std::unique_ptr<FetchedLog>(new FetchedLog());
  log->path_ = (dir / kFetchedLogName).string();
  log->fd_ = ::open(log->path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log->fd_ < 0) return error("{}: cannot open: {}", log->path_, std::strerror(errno));
  log->layers_ = moe_layers, log->experts_ = experts;
  log->have_.assign(size_t(moe_layers) * size_t(experts), 0);
  log->sums_.assign(log->have_.size(), {});
  DF_TRY(log->refresh());
  return log;
}

FetchedLog::~FetchedLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status FetchedLog::refresh() {
  std::lock_guard<std::mutex> lock(mu_);
  return read_from(read_to_);
}

Status FetchedLog::read_from(uint64_t offset) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return error("{}: {}", path_, std::strerror(errno));
  const uint64_t end = uint64_t(st.st_size) / kFetchedRecordBytes * kFetchedRecordBytes;  // a torn tail waits
  if (end <= offset) return {};
  std::vector<uint8_t> buf(end - offset);
  uint64_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::pread(fd_, buf.data() + got, buf.size() - got, off_t(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return error("{}: cannot read: {}", path_, n < 0 ? std::strerror(errno) : "short file");
    got += uint64_t(n);
  }
  for (size_t at = 0; at < buf.size(); at += kFetchedRecordBytes) {
    const uint8_t* r = buf.data() + at;
    const Hash128 c = xxh3_128({r, 32});
    const uint32_t m = get32(r + 4), e = get32(r + 8);
    if (get32(r) != kMagic || get64(r + 32) != c.hi || get64(r + 40) != c.lo || get32(r + 12) != 0 ||
        m >= uint32_t(layers_) || e >= uint32_t(experts_)) {
      ++skipped_;
      continue;
    }
    const size_t k = size_t(m) * size_t(experts_) + e;
    if (!have_[k]) ++count_;
    have_[k] = 1;
    sums_[k] = {get64(r + 16), get64(r + 24)};
  }
  read_to_ = end;
  return {};
}

std::optional<Hash128> FetchedLog::lookup(int moe_index, int expert) const {
  if (moe_index < 0 || moe_index >= layers_ || expert < 0 || expert >= experts_) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  const size_t k = size_t(moe_index) * size_t(experts_) + size_t(expert);
  if (!have_[k]) return std::nullopt;
  return sums_[k];
}

Status FetchedLog::append(int moe_index, int expert, const Hash128& h) {
  const std::vector<uint8_t> r = encode(moe_index, expert, h);
  std::lock_guard<std::mutex> lock(mu_);
  // A tail another writer tore (killed mid-write) would misalign every later
  // record: pad it out to a whole (ignored) record first.
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return error("{}: {}", path_, std::strerror(errno));
  if (const uint64_t rem = uint64_t(st.st_size) % kFetchedRecordBytes) {
    std::vector<uint8_t> pad(kFetchedRecordBytes - rem, 0);
    if (::write(fd_, pad.data(), pad.size()) != ssize_t(pad.size())) return error("{}: cannot write: {}", path_, std::strerror(errno));
  }
  if (::write(fd_, r.data(), r.size()) != ssize_t(r.size()) || ::fdatasync(fd_) != 0)
    return error("{}: cannot append: {}", path_, std::strerror(errno));
  const size_t k = size_t(moe_index) * size_t(experts_) + size_t(expert);
  if (!have_[k]) ++count_;
  have_[k] = 1;
  sums_[k] = h;
  return {};
}

size_t FetchedLog::local_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

size_t FetchedLog::skipped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return skipped_;
}

}  // namespace deltafin
