// The read engine: per-drive queues feeding io_uring (O_DIRECT, aligned
// buffers) or, where io_uring is unavailable, a pread thread pool; buffered
// reads where O_DIRECT is refused. Each read names its replicas; the engine
// picks the drive that would finish it first ((bytes in flight + this read) /
// measured rate), splits a large read across replicas, verifies the xxh3-128
// of the payload, and on an I/O error or checksum mismatch retries on another
// replica before failing with a message naming the read, drive and file.
// Demand and prefetch have separate in-flight budgets per drive; prefetch can
// never take the slots demand needs. The decisions themselves are pure
// functions in io/scheduler.h, shared with the drive simulator (src/sim).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/aligned_arena.h"
#include "io/checksum.h"

namespace deltafin::io {

enum class Backend { Auto, Uring, Pread };

struct EngineOptions {
  Backend backend = Backend::Auto;
  bool direct = true;            // try O_DIRECT; buffered where the filesystem refuses it
  int queue_depth = 32;          // reads in flight per drive
  int prefetch_depth = 8;        // of which at most this many are prefetches
  int pread_threads = 8;         // per drive, pread backend (its queue depth)
  bool verify = true;            // check xxh3-128 of every read
  uint64_t split_min = 8 << 20;  // reads at least this long are split across replicas
  // One line for every retry on another copy (naming the read, the copy that
  // failed and why, and the copy tried next), every read that succeeded
  // after a failure ("healed") and every file that falls back from O_DIRECT
  // to buffered reads. Called from the engine's threads, so it must be
  // thread-safe. Empty: each line goes to stderr.
  std::function<void(const std::string&)> log;
};

struct DriveSpec {
  std::string root;
  double rate_mb_s = 1000;  // starting estimate; learned from completed reads
};

struct Replica {
  int file = -1;  // from add_file
  uint64_t offset = 0;
};

struct ReadRequest {
  std::vector<Replica> replicas;  // distinct drives; the first is the primary
  uint64_t length = 0;            // payload bytes covered by the checksum
  uint64_t span = 0;              // bytes to read: a multiple of 4096, >= length
  uint8_t* dest = nullptr;        // 4096-aligned, at least span bytes
  Purpose purpose = Purpose::Demand;
  bool has_checksum = false;
  Hash128 checksum;
  std::string label;              // e.g. "layer 3 expert 17", for errors
};

struct DriveStats {
  std::string root, mode;  // mode: "io_uring+O_DIRECT", "pread+buffered", ...
  uint64_t bytes[2] = {0, 0}, reads[2] = {0, 0};  // by purpose
  uint64_t io_errors = 0, checksum_errors = 0, retries_from = 0;  // retries_from: reads retried elsewhere after failing here
  double busy_seconds = 0;  // time with at least one read in flight
  // Reads in flight integrated over time (read-seconds): over busy_seconds,
  // the mean queue the drive saw while busy (below the queue depth where
  // reads are started late).
  double inflight_seconds = 0;
  double rate_mb_s = 0;     // current estimate (EWMA)
};

struct EngineStats {
  std::vector<DriveStats> drives;
  uint64_t reads_ok = 0, reads_failed = 0, reads_cancelled = 0, retries = 0, split_reads = 0;
  double checksum_seconds = 0;
  uint64_t checksum_bytes = 0;
};

class ReadJob;  // opaque
using ReadHandle = std::shared_ptr<ReadJob>;

class ReadEngine {
 public:
  static Result<std::unique_ptr<ReadEngine>> create(const std::vector<DriveSpec>& drives, const EngineOptions& opts);
  ~ReadEngine();
  ReadEngine(const ReadEngine&) = delete;
  ReadEngine& operator=(const ReadEngine&) = delete;

  // Opens a file on a drive and checks its size; the file id for Replica.
  Result<int> add_file(int drive, const std::string& path, uint64_t expected_size);
  // Marks a drive unusable (its replicas are skipped); reads then go elsewhere.
  void disable_drive(int drive);

  ReadHandle submit(ReadRequest req);
  // Submits reads known together (a layer's experts) as io::plan_batch plans
  // them: split reads water-filled over their replicas' drives given the bytes
  // in flight and the parts before them; the other reads' replicas chosen
  // together, so that the batch's busiest drive finishes no later than with
  // one-by-one picks. A handle per request, in order.
  std::vector<ReadHandle> submit_batch(std::vector<ReadRequest> reqs);
  // Blocks until the read is finished (ok, failed or cancelled); after it
  // returns the engine no longer touches req.dest. The checksum is computed
  // here, in the caller's thread (the drive threads only move bytes), and a
  // mismatch starts the retry on another copy before waiting again.
  Status wait(const ReadHandle& h);
  // Drops the read's queued parts; parts already inside the kernel finish
  // into dest, and wait() returns "cancelled" once none remain.
  void cancel(const ReadHandle& h);
  // A prefetch became needed: its parts still queued move to the demand
  // queue (ahead of every prefetch, under the demand budget); parts already
  // in flight finish as they are. A retry after a failure is demand.
  void promote(const ReadHandle& h);
  // The read is over (ok, failed or cancelled): the engine no longer touches
  // its buffer. (A read whose bytes are in but not yet verified is not over:
  // its checksum is checked by wait().)
  bool finished(const ReadHandle& h) const;
  // Every byte of the read is in (its checksum perhaps still to check in
  // wait()), or it is over: wait() would not block on a drive.
  bool landed(const ReadHandle& h) const;
  // When the last byte of the read's latest attempt arrived (before its
  // checksum); the epoch if none has. What a drive model predicts.
  std::chrono::steady_clock::time_point bytes_in_at(const ReadHandle& h) const;

  EngineStats stats() const;
  const EngineOptions& options() const { return opts_; }
  int drive_count() const;
  std::string drive_mode(int drive) const;

  struct Impl;

 private:
  ReadEngine() = default;
  EngineOptions opts_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deltafin::io
