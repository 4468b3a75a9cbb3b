#include "io/read_engine.h"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "io/scheduler.h"

namespace deltafin::io {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

class ReadJob {
 public:
  explicit ReadJob(ReadRequest r) : req(std::move(r)) {}
  ReadRequest req;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, cancelled = false, part_failed = false;
  bool verify_pending = false, verifying = false;  // all bytes in; the waiter checks the checksum
  Status result;
  int pending = 0;              // parts queued or in flight
  std::chrono::steady_clock::time_point bytes_in_at{};  // the last part of the latest attempt arrived
  std::vector<char> tried;      // per replica: a whole-span attempt failed there, or it is unusable
  int attempt = -1;             // replica of the current whole-span attempt; -1 for a split read
  std::string failures;         // "; "-separated reasons, for the final error
  std::string last_failure;     // the latest attempt's reason, for the retry's log line
  int failed_attempts = 0;
};

namespace {

struct Chunk {
  ReadHandle job;
  int file = -1;
  uint64_t offset = 0, len = 0;
  uint8_t* dest = nullptr;
  uint64_t done = 0;  // bytes already read (short reads resume)
  // Which queue and budget the chunk belongs to: set from the read's purpose
  // when the chunk is made, changed only while queued (promote), so the
  // in-flight counts stay balanced.
  Purpose purpose = Purpose::Demand;
};

struct FileEntry {
  int drive = -1;
  std::string path;
  int fd_direct = -1, fd_buffered = -1;
  std::atomic<bool> direct{false};
};

}  // namespace

struct ReadEngine::Impl {
  struct Drive {
    DriveSpec spec;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Chunk> q[2];
    int inflight[2] = {0, 0};
    uint64_t inflight_bytes = 0;
    std::atomic<bool> disabled{false};
    bool stop = false;
    DriveStats st;
    Clock::time_point busy_since;
    Clock::time_point counted_to;  // st.inflight_seconds covers the time up to here
    RateEstimator est;  // bytes/s, learned from completed reads
    bool uring = false;
    // io_uring: the submission side (get_sqe, prep, submit) is used under mu
    // by whichever thread has reads to start; only the ring thread reaps.
    bool ring_broken = false;       // io_uring failed: the ring thread serves the queue with pread
    std::vector<Chunk*> in_ring;    // submitted and not yet reaped (failed as errors if the ring breaks)
    io_uring ring{};
    int efd = -1;
    int depth = 1;
    std::vector<std::thread> threads;
  };

  EngineOptions opts;
  std::deque<Drive> drives;
  std::mutex files_mu;
  std::deque<FileEntry> files;
  std::atomic<uint64_t> reads_ok{0}, reads_failed{0}, reads_cancelled{0}, retries{0}, split_reads{0};
  std::atomic<uint64_t> checksum_ns{0}, checksum_bytes{0};

  uint64_t total_bytes(const Drive& d) const { return d.st.bytes[0] + d.st.bytes[1]; }

  void log(const std::string& line) const {
    if (opts.log) opts.log(line);
    else std::fprintf(stderr, "%s\n", line.c_str());
  }

  // The file's reads go buffered from now on (logged once per file).
  void direct_refused(FileEntry& f) {
    if (f.direct.exchange(false))
      log(fmt::format("store read: {}: O_DIRECT read refused (EINVAL); buffered reads for this file from now on", f.path));
  }

  // With j.mu held: a failed attempt's reason, for the error and the log.
  void note_failure(ReadJob& j, std::string why) {
    j.failures += (j.failures.empty() ? "" : "; ") + why;
    j.last_failure = std::move(why);
    j.failed_attempts++;
  }

  // A chunk may start on this drive now; with d.mu held.
  bool pick(Drive& d, Purpose& p) const {
    const auto next =
        admit_next({d.depth, opts.prefetch_depth, d.inflight[0], d.inflight[1], !d.q[0].empty(), !d.q[1].empty()});
    if (!next) return false;
    p = *next;
    return true;
  }

  // Adds the reads in flight since the last change, up to `now`; with d.mu held.
  static void count_inflight(Drive& d, Clock::time_point now) {
    if (const int n = d.inflight[0] + d.inflight[1]; n > 0) d.st.inflight_seconds += n * seconds_between(d.counted_to, now);
    d.counted_to = now;
  }

  Chunk start(Drive& d, Purpose p) {  // with d.mu held
    Chunk c = std::move(d.q[int(p)].front());
    d.q[int(p)].pop_front();
    const auto now = Clock::now();
    count_inflight(d, now);
    if (d.inflight[0] + d.inflight[1] == 0) d.busy_since = now;
    d.inflight[int(p)]++;
    d.inflight_bytes += c.len;
    return c;
  }

  void account(Drive& d, const Chunk& c, bool ok) {
    std::lock_guard<std::mutex> lock(d.mu);
    const int p = int(c.purpose);
    const auto now = Clock::now();
    count_inflight(d, now);
    d.inflight[p]--;
    d.inflight_bytes -= c.len;
    if (ok) {
      d.st.bytes[p] += c.len;
      d.st.reads[p]++;
    } else {
      d.st.io_errors++;
    }
    if (d.inflight[0] + d.inflight[1] == 0) {
      d.st.busy_seconds += seconds_between(d.busy_since, now);
      d.busy_since = now;
    }
    const double busy = d.st.busy_seconds + (d.inflight[0] + d.inflight[1] ? seconds_between(d.busy_since, now) : 0);
    d.est.observe(busy, total_bytes(d));
  }

  void enqueue(Chunk c) {
    Drive& d = drives[files[c.file].drive];
    std::lock_guard<std::mutex> lock(d.mu);
    d.q[int(c.purpose)].push_back(std::move(c));
    admit(d);
  }

  // With d.mu held, after a queue or a budget changed. io_uring: the calling
  // thread starts what the budgets admit itself. Waking the ring thread to do
  // it cost 0.55 ms median per MoE layer on a 2-vCPU VM (the doorbell's
  // cross-CPU wake-up), with the drive idle all that time; the ring thread
  // only reaps completions (and then starts reads itself). pread: a worker wakes.
  void admit(Drive& d) {
    if (!d.uring || d.ring_broken) return d.cv.notify_one();
    Purpose p{};
    int n = 0;
    while (pick(d, p)) {
      Chunk* c = new Chunk(start(d, p));
      d.in_ring.push_back(c);
      prep(d, c);
      ++n;
    }
    // Submission does not wait for the reads; a failure leaves them in the
    // ring, for the next submit to retry.
    if (n) io_uring_submit(&d.ring);
  }

  // Wakes the ring thread to stop (io_uring), or the pread workers.
  void wake_to_stop(Drive& d) {
    if (d.uring) {
      uint64_t one = 1;
      ssize_t n = ::write(d.efd, &one, sizeof one);
      (void)n;
    }
    d.cv.notify_all();
  }

  std::vector<size_t> usable_replicas(ReadJob& j);
  std::vector<ReplicaLoad> drive_loads();  // per drive: bytes in flight, rate estimate

  bool usable(const ReadJob& j, size_t r) const {
    const Replica& rp = j.req.replicas[r];
    if (rp.file < 0 || size_t(rp.file) >= files.size()) return false;
    return !drives[files[rp.file].drive].disabled.load();
  }

  // The replica's drive load, for the scheduler's finish estimate.
  ReplicaLoad load(const ReadJob& j, size_t r) {
    Drive& d = drives[files[j.req.replicas[r].file].drive];
    std::lock_guard<std::mutex> lock(d.mu);
    return {d.inflight_bytes, d.est.rate};
  }

  std::string where(int file) const {
    const FileEntry& f = files[file];
    return fmt::format("drive {} ({}) file {}", f.drive, drives[f.drive].spec.root, f.path);
  }

  void finish(ReadJob& j, Status s) {  // with j.mu held
    j.done = true;
    j.result = std::move(s);
    if (j.result.ok() && j.failed_attempts > 0 && j.attempt >= 0)
      log(fmt::format("store read: {}: healed: read from {} after {} failed attempt{}", j.req.label,
                      where(j.req.replicas[j.attempt].file), j.failed_attempts, j.failed_attempts == 1 ? "" : "s"));
    if (j.result.ok()) reads_ok++;
    else if (j.cancelled) reads_cancelled++;
    else reads_failed++;
    j.cv.notify_all();
  }

  // Starts the next whole-span attempt, or finishes with the collected errors.
  // With j.mu held; returns the chunk to enqueue after unlocking (if any).
  // `prefer`: the replica a batch assigned, if still untried; else the
  // scheduler's pick now.
  std::optional<Chunk> next_attempt(const ReadHandle& h, int prefer = -1) {
    ReadJob& j = *h;
    std::vector<size_t> untried;
    std::vector<ReplicaLoad> loads;
    for (size_t r = 0; r < j.req.replicas.size(); ++r)
      if (!j.tried[r]) untried.push_back(r);
    const bool preferred = prefer >= 0 && size_t(prefer) < j.tried.size() && !j.tried[size_t(prefer)];
    if (!preferred)
      for (size_t r : untried) loads.push_back(load(j, r));
    const int pick = preferred ? 0 : pick_replica(loads, j.req.span);
    if (pick < 0) {
      finish(j, error("{}: no replica could be read: {}", j.req.label, j.failures.empty() ? "no usable replica" : j.failures));
      return std::nullopt;
    }
    const int best = preferred ? prefer : int(untried[pick]);
    j.attempt = best;
    j.pending = 1;
    j.part_failed = false;
    const Replica& rp = j.req.replicas[best];
    return Chunk{h, rp.file, rp.offset, j.req.span, j.req.dest, 0, j.req.purpose};
  }

  // One part of a read finished (err: 0 or an errno / -1 for a short read).
  void part_done(const Chunk& c, int err) {
    ReadJob& j = *c.job;
    std::unique_lock<std::mutex> lock(j.mu);
    if (err) {
      j.part_failed = true;
      note_failure(j, fmt::format("{}: {} at offset {}", where(c.file),
                                  err > 0 ? std::strerror(err) : "short read (file truncated?)", c.offset));
    }
    if (--j.pending > 0) return;
    j.bytes_in_at = Clock::now();
    if (j.cancelled) return finish(j, error("{}: cancelled", j.req.label));
    if (!j.part_failed && opts.verify && j.req.has_checksum) {
      // Hashing is left to the waiting thread, so this (ring) thread goes
      // straight back to keeping the drive's queue full.
      j.verify_pending = true;
      j.cv.notify_all();
      return;
    }
    if (!j.part_failed) return finish(j, {});
    auto next = retry(c.job);
    lock.unlock();
    if (next) enqueue(std::move(*next));
  }

  // The current attempt failed: count it and start the next (with j.mu held).
  std::optional<Chunk> retry(const ReadHandle& h) {
    ReadJob& j = *h;
    if (j.attempt >= 0) {
      j.tried[j.attempt] = 1;
      Drive& d = drives[files[j.req.replicas[j.attempt].file].drive];
      std::lock_guard<std::mutex> dl(d.mu);
      d.st.retries_from++;
    }
    retries++;
    auto next = next_attempt(h);
    if (next)
      log(fmt::format("store read: {}: {}; retrying on {}", j.req.label, j.last_failure, where(next->file)));
    return next;
  }

  // In the waiting thread, with j.mu held via `lock`: checks the payload.
  void verify(const ReadHandle& h, std::unique_lock<std::mutex>& lock) {
    ReadJob& j = *h;
    j.verify_pending = false;
    j.verifying = true;
    lock.unlock();
    const auto t0 = Clock::now();
    const Hash128 sum = xxh3_128({j.req.dest, j.req.length});
    checksum_ns += uint64_t(seconds_between(t0, Clock::now()) * 1e9);
    checksum_bytes += j.req.length;
    lock.lock();
    j.verifying = false;
    if (j.done) return;  // cancelled meanwhile
    if (j.cancelled) return finish(j, error("{}: cancelled", j.req.label));
    if (sum == j.req.checksum) return finish(j, {});
    if (j.attempt >= 0) {
      const int file = j.req.replicas[j.attempt].file;
      Drive& d = drives[files[file].drive];
      {
        std::lock_guard<std::mutex> dl(d.mu);
        d.st.checksum_errors++;
      }
      note_failure(j, fmt::format("{}: checksum mismatch at offset {} (xxh3 {} != manifest {})", where(file),
                                  j.req.replicas[j.attempt].offset, sum.hex(), j.req.checksum.hex()));
    } else {
      note_failure(j, "checksum mismatch on a read split across replicas");
    }
    auto next = retry(h);
    if (next) {
      lock.unlock();
      enqueue(std::move(*next));
      lock.lock();
    }
  }

  // pread until the chunk is complete; 0 or an errno (-1: end of file).
  int read_chunk(Chunk& c) {
    FileEntry& f = files[c.file];
    while (c.done < c.len) {
      const bool direct = f.direct.load();
      ssize_t n = ::pread(direct ? f.fd_direct : f.fd_buffered, c.dest + c.done, c.len - c.done, off_t(c.offset + c.done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EINVAL && direct) {
        direct_refused(f);  // the filesystem refuses O_DIRECT for this read: buffered from now on
        continue;
      }
      if (n < 0) return errno;
      if (n == 0) return -1;
      c.done += uint64_t(n);
    }
    return 0;
  }

  void pread_loop(Drive& d) {
    for (;;) {
      Chunk c;
      {
        std::unique_lock<std::mutex> lock(d.mu);
        Purpose p{};
        d.cv.wait(lock, [&] { return d.stop || pick(d, p); });
        if (!pick(d, p)) return;  // stopping and nothing admissible
        c = start(d, p);
      }
      const int err = read_chunk(c);
      account(d, c, err == 0);
      part_done(c, err);
      d.cv.notify_one();  // a slot freed: another worker may start a prefetch
    }
  }

  void arm_doorbell(Drive& d) {  // with d.mu held
    io_uring_sqe* sqe = io_uring_get_sqe(&d.ring);
    io_uring_prep_poll_add(sqe, d.efd, POLLIN);
    io_uring_sqe_set_data(sqe, nullptr);
    io_uring_submit(&d.ring);
  }

  void prep(Drive& d, Chunk* c) {  // with d.mu held
    FileEntry& f = files[c->file];
    io_uring_sqe* sqe = io_uring_get_sqe(&d.ring);
    const bool direct = f.direct.load();
    io_uring_prep_read(sqe, direct ? f.fd_direct : f.fd_buffered, c->dest + c->done, unsigned(c->len - c->done),
                       c->offset + c->done);
    io_uring_sqe_set_data(sqe, c);
  }

  void uring_loop(Drive& d) {
    {
      std::lock_guard<std::mutex> lock(d.mu);
      arm_doorbell(d);
    }
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(d.mu);
        admit(d);
        if (d.stop && d.in_ring.empty() && d.q[0].empty() && d.q[1].empty()) return;
      }
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&d.ring, &cqe);  // reaps only: never touches the submission side
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) return ring_failed(d, rc);
      while (io_uring_peek_cqe(&d.ring, &cqe) == 0) {
        auto* c = static_cast<Chunk*>(io_uring_cqe_get_data(cqe));
        const int res = cqe->res;
        io_uring_cqe_seen(&d.ring, cqe);
        if (!c) {  // doorbell: stop
          uint64_t v;
          ssize_t n = ::read(d.efd, &v, sizeof v);
          (void)n;
          std::lock_guard<std::mutex> lock(d.mu);
          arm_doorbell(d);
          continue;
        }
        // The lock also orders this thread after the submitting thread's
        // writes to *c (the kernel's ordering is invisible to TSan).
        std::unique_lock<std::mutex> lock(d.mu);
        FileEntry& f = files[c->file];
        // -ECANCELED: the thread that submitted the read exited while it was
        // queued in io_uring's workers; this thread reissues it.
        const bool again =
            res == -EAGAIN || res == -EINTR || res == -ECANCELED || (res == -EINVAL && f.direct.load());
        if (res == -EINVAL && again) direct_refused(f);
        if (res > 0) c->done += uint64_t(res);
        if (again || (res > 0 && c->done < c->len)) {  // retry, or resume a short read
          prep(d, c);
          io_uring_submit(&d.ring);
          continue;
        }
        d.in_ring.erase(std::find(d.in_ring.begin(), d.in_ring.end(), c));
        lock.unlock();
        const int err = res < 0 ? -res : (c->done < c->len ? -1 : 0);
        account(d, *c, err == 0);
        part_done(*c, err);
        delete c;
      }
    }
  }

  // io_uring itself failed (not one read): the reads it held fail as I/O
  // errors (so they retry on a replica or report), and this thread serves
  // the drive's queue with pread from now on.
  void ring_failed(Drive& d, int rc) {
    std::vector<Chunk*> lost;
    {
      std::lock_guard<std::mutex> lock(d.mu);
      d.ring_broken = true;
      lost.swap(d.in_ring);
    }
    for (Chunk* c : lost) {
      account(d, *c, false);
      part_done(*c, -rc);
      delete c;
    }
    pread_loop(d);
  }
};

Result<std::unique_ptr<ReadEngine>> ReadEngine::create(const std::vector<DriveSpec>& drives, const EngineOptions& opts) {
  if (drives.empty()) return error("read engine: no drives");
  if (opts.queue_depth < 1 || opts.queue_depth > 4096) return error("read engine: queue depth {} is out of range", opts.queue_depth);
  auto e = std::unique_ptr<ReadEngine>(new ReadEngine());
  e->opts_ = opts;
  e->impl_ = std::make_unique<Impl>();
  Impl& im = *e->impl_;
  im.opts = opts;
  for (const auto& spec : drives) {
    Impl::Drive& d = im.drives.emplace_back();
    d.spec = spec;
    d.est.rate = std::max(spec.rate_mb_s, 1.0) * 1e6;
    d.st.root = spec.root;
    if (opts.backend != Backend::Pread) {
      d.efd = ::eventfd(0, EFD_CLOEXEC);
      if (d.efd >= 0 && io_uring_queue_init(unsigned(opts.queue_depth + 2), &d.ring, 0) == 0) {
        d.uring = true;
      } else if (d.efd >= 0) {
        ::close(d.efd);
        d.efd = -1;
      }
      if (!d.uring && opts.backend == Backend::Uring) return error("read engine: io_uring is unavailable on this host");
    }
    d.depth = drive_depth(d.uring, opts.queue_depth, opts.pread_threads);
  }
  for (auto& d : im.drives) {
    if (d.uring) {
      d.threads.emplace_back([&im, &d] { im.uring_loop(d); });
    } else {
      for (int i = 0; i < d.depth; ++i) d.threads.emplace_back([&im, &d] { im.pread_loop(d); });
    }
  }
  return e;
}

ReadEngine::~ReadEngine() {
  if (!impl_) return;
  for (auto& d : impl_->drives) {
    {
      std::lock_guard<std::mutex> lock(d.mu);
      d.stop = true;
    }
    impl_->wake_to_stop(d);
  }
  for (auto& d : impl_->drives) {
    for (auto& t : d.threads) t.join();
    if (d.uring) io_uring_queue_exit(&d.ring);
    if (d.efd >= 0) ::close(d.efd);
  }
  for (auto& f : impl_->files) {
    if (f.fd_direct >= 0) ::close(f.fd_direct);
    if (f.fd_buffered >= 0) ::close(f.fd_buffered);
  }
}

int ReadEngine::drive_count() const { return int(impl_->drives.size()); }

std::string ReadEngine::drive_mode(int drive) const {
  const auto& d = impl_->drives[drive];
  bool any = false, all_direct = true;
  for (const auto& f : impl_->files)
    if (f.drive == drive) any = true, all_direct = all_direct && f.direct.load();
  return fmt::format("{}+{}", d.uring ? "io_uring" : fmt::format("pread x{}", d.depth),
                     !any ? "no files" : all_direct ? "O_DIRECT" : "buffered");
}

Result<int> ReadEngine::add_file(int drive, const std::string& path, uint64_t expected_size) {
  if (drive < 0 || drive >= drive_count()) return error("{}: drive {} does not exist", path, drive);
  int fb = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fb < 0) return error("drive {} ({}): {}: cannot open: {}", drive, impl_->drives[drive].spec.root, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fb, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fb);
    return error("drive {} ({}): {}: not a regular file", drive, impl_->drives[drive].spec.root, path);
  }
  if (uint64_t(st.st_size) != expected_size) {
    ::close(fb);
    return error("drive {} ({}): {}: size {} bytes, manifest says {} (truncated or replaced)", drive,
                 impl_->drives[drive].spec.root, path, uint64_t(st.st_size), expected_size);
  }
  int fd = opts_.direct ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
  std::lock_guard<std::mutex> lock(impl_->files_mu);
  FileEntry& f = impl_->files.emplace_back();
  f.drive = drive;
  f.path = path;
  f.fd_buffered = fb;
  f.fd_direct = fd;
  f.direct = fd >= 0;
  return int(impl_->files.size() - 1);
}

void ReadEngine::disable_drive(int drive) {
  if (drive >= 0 && drive < drive_count()) impl_->drives[drive].disabled = true;
}

// Marks the unusable replicas tried and returns the usable ones; finishes an
// invalid read with its error (then returns nothing). With j.mu held.
std::vector<size_t> ReadEngine::Impl::usable_replicas(ReadJob& j) {
  j.tried.assign(j.req.replicas.size(), 0);
  std::vector<size_t> ok;
  for (size_t r = 0; r < j.req.replicas.size(); ++r) {
    if (usable(j, r)) ok.push_back(r);
    else j.tried[r] = 1;
  }
  if (j.req.span == 0 || j.req.span % 4096 || j.req.length > j.req.span || !j.req.dest) {
    finish(j, error("{}: invalid read (span {}, length {})", j.req.label, j.req.span, j.req.length));
    return {};
  }
  return ok;
}

std::vector<ReplicaLoad> ReadEngine::Impl::drive_loads() {
  std::vector<ReplicaLoad> out;
  for (auto& d : drives) {
    std::lock_guard<std::mutex> lock(d.mu);
    out.push_back({d.inflight_bytes, d.est.rate});
  }
  return out;
}

ReadHandle ReadEngine::submit(ReadRequest req) {
  std::vector<ReadRequest> one;
  one.push_back(std::move(req));
  return submit_batch(std::move(one)).front();
}

std::vector<ReadHandle> ReadEngine::submit_batch(std::vector<ReadRequest> reqs) {
  Impl& im = *impl_;
  std::vector<ReadHandle> out;
  std::vector<std::vector<size_t>> usable;  // per read: its usable replicas
  std::vector<BatchRead> batch;             // the same, as drives (none for an invalid read)
  for (auto& req : reqs) {
    auto h = std::make_shared<ReadJob>(std::move(req));
    out.push_back(h);
    std::lock_guard<std::mutex> lock(h->mu);
    usable.push_back(im.usable_replicas(*h));
    BatchRead b{{}, h->req.span};
    if (!h->done)
      for (size_t r : usable.back()) b.drives.push_back(im.files[h->req.replicas[r].file].drive);
    batch.push_back(std::move(b));
  }
  const auto plan = plan_batch(batch, im.drive_loads(), opts_.split_min);
  std::vector<Chunk> parts;
  for (size_t i = 0; i < out.size(); ++i) {
    const ReadHandle& h = out[i];
    ReadJob& j = *h;
    std::lock_guard<std::mutex> lock(j.mu);
    if (j.done) continue;
    const std::vector<size_t>& ok = usable[i];
    if (should_split(ok.size(), j.req.span, opts_.split_min) && !plan[i].empty()) {
      for (const SplitPiece& piece : plan[i]) {
        const Replica& rp = j.req.replicas[ok[piece.replica]];
        parts.push_back(Chunk{h, rp.file, rp.offset + piece.begin, piece.length, j.req.dest + piece.begin, 0, j.req.purpose});
      }
      j.attempt = -1;
      j.pending = int(plan[i].size());
      im.split_reads++;
    } else if (auto c = im.next_attempt(h, plan[i].empty() ? -1 : int(ok[plan[i][0].replica]))) {
      parts.push_back(std::move(*c));
    }
  }
  for (auto& c : parts) im.enqueue(std::move(c));
  return out;
}

Status ReadEngine::wait(const ReadHandle& h) {
  std::unique_lock<std::mutex> lock(h->mu);
  for (;;) {
    h->cv.wait(lock, [&] { return h->done || (h->verify_pending && !h->verifying); });
    if (h->done) return h->result;
    impl_->verify(h, lock);
  }
}

void ReadEngine::cancel(const ReadHandle& h) {
  {
    std::lock_guard<std::mutex> lock(h->mu);
    if (h->done) return;
    h->cancelled = true;
  }
  int removed = 0;
  for (auto& d : impl_->drives) {
    std::lock_guard<std::mutex> lock(d.mu);
    for (auto& q : d.q) {
      auto it = std::remove_if(q.begin(), q.end(), [&](const Chunk& c) { return c.job == h; });
      removed += int(q.end() - it);
      q.erase(it, q.end());
    }
  }
  std::lock_guard<std::mutex> lock(h->mu);
  h->pending -= removed;
  if (h->pending == 0 && !h->done) impl_->finish(*h, error("{}: cancelled", h->req.label));
}

void ReadEngine::promote(const ReadHandle& h) {
  {
    std::lock_guard<std::mutex> lock(h->mu);
    if (h->done || h->req.purpose == Purpose::Demand) return;
    h->req.purpose = Purpose::Demand;  // a retry after a failure is demand too
  }
  for (auto& d : impl_->drives) {
    bool moved = false;
    {
      std::lock_guard<std::mutex> lock(d.mu);
      auto& pq = d.q[int(Purpose::Prefetch)];
      for (auto it = pq.begin(); it != pq.end();) {
        if (it->job == h) {
          it->purpose = Purpose::Demand;
          d.q[int(Purpose::Demand)].push_back(std::move(*it));
          it = pq.erase(it);
          moved = true;
        } else {
          ++it;
        }
      }
    }
    if (moved) {
      std::lock_guard<std::mutex> lock(d.mu);
      impl_->admit(d);  // the demand budget may start it now
    }
  }
}

std::chrono::steady_clock::time_point ReadEngine::bytes_in_at(const ReadHandle& h) const {
  std::lock_guard<std::mutex> lock(h->mu);
  return h->bytes_in_at;
}

bool ReadEngine::finished(const ReadHandle& h) const {
  std::lock_guard<std::mutex> lock(h->mu);
  return h->done;
}

bool ReadEngine::landed(const ReadHandle& h) const {
  std::lock_guard<std::mutex> lock(h->mu);
  return h->done || h->verify_pending;
}

EngineStats ReadEngine::stats() const {
  EngineStats s;
  for (size_t i = 0; i < impl_->drives.size(); ++i) {
    auto& d = impl_->drives[i];
    std::lock_guard<std::mutex> lock(d.mu);
    DriveStats ds = d.st;
    const auto now = Clock::now();
    if (d.inflight[0] + d.inflight[1]) {
      ds.busy_seconds += seconds_between(d.busy_since, now);
      ds.inflight_seconds += (d.inflight[0] + d.inflight[1]) * seconds_between(d.counted_to, now);
    }
    ds.rate_mb_s = d.est.rate / 1e6;
    s.drives.push_back(ds);
  }
  for (size_t i = 0; i < s.drives.size(); ++i) s.drives[i].mode = drive_mode(int(i));
  s.reads_ok = impl_->reads_ok;
  s.reads_failed = impl_->reads_failed;
  s.reads_cancelled = impl_->reads_cancelled;
  s.retries = impl_->retries;
  s.split_reads = impl_->split_reads;
  s.checksum_seconds = double(impl_->checksum_ns.load()) / 1e9;
  s.checksum_bytes = impl_->checksum_bytes;
  return s;
}

}  // namespace deltafin::io
