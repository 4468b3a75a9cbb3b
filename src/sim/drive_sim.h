// A discrete-event model of the drives under the read engine's scheduler
// (io/scheduler.h, the same code the engine runs), on a simulated clock.
//
// Drive model (docs/design/simulator.md): a drive serves at most `queue_depth`
// requests at once. A request, once admitted, first waits `latency_us` (not
// using bandwidth), then transfers its bytes; the requests transferring on a
// drive share its bandwidth equally (processor sharing). With a shared link,
// when the drives that are transferring ask for more than the link's MB/s in
// total, each is scaled down by the same factor link / sum(their bandwidths).
// A request never transfers faster than `request_mb_s` (when set): a disk
// that needs several requests in flight to reach its bandwidth (a virtio
// disk, an NVMe drive with small internal parallelism per command) serves a
// lone request slower. So a lone request takes latency + bytes /
// min(bandwidth, request_mb_s), exactly.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/read_engine.h"
#include "io/scheduler.h"

namespace deltafin::sim {

struct DriveModel {
  double mb_s = 0;          // bandwidth, MB/s (10^6 bytes/s)
  double latency_us = 100;  // per request, before its bytes move
  int queue_depth = 4;      // requests in service at once (the engine's reads in flight per drive; run's default)
  double request_mb_s = 0;  // the most one request transfers at, MB/s; 0: no limit but the drive's
};

// "BW_MBps[:LATENCY_US[:QUEUE_DEPTH[:REQUEST_MBps]]]", e.g. "3000",
// "3000:80", "3000:80:32", "3000:80:4:1200"; omitted fields keep
// DriveModel's defaults.
Result<DriveModel> parse_drive_model(const std::string& text);

struct SimOptions {
  std::vector<DriveModel> drives;
  double link_mb_s = 0;  // shared by all drives; 0: no shared link
  uint64_t split_min = io::EngineOptions{}.split_min;
  int prefetch_depth = io::EngineOptions{}.prefetch_depth;
  std::vector<double> rate_estimates_mb_s;  // the scheduler's starting estimates; empty: each drive's mb_s
};

struct SimRead {
  std::vector<int> drives;  // one per copy, primary first, distinct
  uint64_t span = 0;        // bytes
  io::Purpose purpose = io::Purpose::Demand;
};

struct SimDriveStats {
  uint64_t bytes = 0, reads = 0;  // pieces of split reads count as reads
  double busy_seconds = 0;        // time with at least one request in service
  double rate_estimate_mb_s = 0;  // the scheduler's estimate at the end
};

class DriveSim {
 public:
  static Result<DriveSim> create(const SimOptions& opts);

  // Submits the reads at the current time as the engine's submit_batch does
  // (io::plan_batch: split reads water-filled first, in order; then the whole
  // reads' replicas chosen together), and runs until all have completed;
  // the clock is then at the last completion.
  Status run_batch(std::span<const SimRead> reads);
  // Time passes with nothing submitted (e.g. compute between layers).
  void idle(double seconds);

  double now() const { return now_; }
  std::vector<SimDriveStats> stats() const;
  uint64_t split_reads() const { return split_reads_; }

 private:
  struct Piece {
    int job = 0;
    io::Purpose purpose = io::Purpose::Demand;
    uint64_t length = 0;
    double remaining = 0;      // bytes still to transfer
    double transfer_from = 0;  // admitted at + latency
  };
  struct Drive {
    DriveModel model;
    int depth = 1;
    std::deque<Piece> queued[2];
    std::vector<Piece> serving;
    int inflight[2] = {0, 0};
    uint64_t inflight_bytes = 0;
    double busy_since = 0;
    io::RateEstimator est;
    SimDriveStats st;
  };

  void enqueue(int drive, Piece p);
  void admit(Drive& d);
  void complete(Drive& d, const Piece& p);
  void step();  // advances to the next event and handles it

  SimOptions opts_;
  std::vector<Drive> drives_;
  std::vector<int> pending_;  // per job of the current batch: pieces not yet complete
  int open_jobs_ = 0;
  double now_ = 0;
  uint64_t split_reads_ = 0;
};

}  // namespace deltafin::sim
