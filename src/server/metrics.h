// Counters behind GET /metrics (Prometheus text format 0.0.4). Thread-safe.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace deltafin::server {

// Values read at scrape time from their owners.
struct MetricsGauges {
  size_t queue_length = 0, queue_capacity = 0;
  bool generation_running = false;
  int64_t connections_open = 0;
  uint64_t connections_accepted = 0, connections_reclaimed = 0, connections_refused = 0;
};

class ServerMetrics {
 public:
  void count_request(int status);
  void add_generation(int64_t prompt, int64_t prefill, int64_t cached, int64_t completion, double prefill_s,
                      double decode_s);
  void add_queue_wait(double seconds);
  // A finished generation's decode passes of the target and its drafts.
  void add_drafting(int64_t target_passes, int64_t proposed, int64_t accepted);
  void add_experts(uint64_t bytes, double wait_seconds);
  // Mean seconds a generation took (queue wait excluded); 0 before the first.
  double mean_generation_seconds() const;

  std::atomic<uint64_t> queue_rejected{0};   // 429: the queue was full
  std::atomic<uint64_t> queue_abandoned{0};  // the client left while waiting
  std::atomic<uint64_t> memo_hits{0};
  std::atomic<uint64_t> cancelled{0};        // generations stopped early (client gone, shutdown)

  std::string render(const MetricsGauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> by_status_;
  uint64_t generations_ = 0;
  int64_t prompt_ = 0, prefill_ = 0, cached_ = 0, completion_ = 0;
  double prefill_s_ = 0, decode_s_ = 0;
  int64_t target_passes_ = 0, draft_proposed_ = 0, draft_accepted_ = 0;
  uint64_t expert_bytes_ = 0;
  double expert_wait_s_ = 0;
  double wait_sum_ = 0;
  uint64_t wait_count_ = 0;
};

}  // namespace deltafin::server
