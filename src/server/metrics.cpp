#include "server/metrics.h"

#include <fmt/format.h>

namespace deltafin::server {

void ServerMetrics::count_request(int status) {
  std::lock_guard lock(mu_);
  by_status_[status]++;
}

void ServerMetrics::add_generation(int64_t prompt, int64_t prefill, int64_t cached, int64_t completion,
                                   double prefill_s, double decode_s) {
  std::lock_guard lock(mu_);
  generations_++;
  prompt_ += prompt;
  prefill_ += prefill;
  cached_ += cached;
  completion_ += completion;
  prefill_s_ += prefill_s;
  decode_s_ += decode_s;
}

void ServerMetrics::add_drafting(int64_t target_passes, int64_t proposed, int64_t accepted) {
  std::lock_guard lock(mu_);
  target_passes_ += target_passes;
  draft_proposed_ += proposed;
  draft_accepted_ += accepted;
}

void ServerMetrics::add_experts(uint64_t bytes, double wait_seconds) {
  std::lock_guard lock(mu_);
  expert_bytes_ += bytes;
  expert_wait_s_ += wait_seconds;
}

void ServerMetrics::add_queue_wait(double seconds) {
  std::lock_guard lock(mu_);
  wait_sum_ += seconds;
  wait_count_++;
}

double ServerMetrics::mean_generation_seconds() const {
  std::lock_guard lock(mu_);
  return generations_ ? (prefill_s_ + decode_s_) / double(generations_) : 0.0;
}

std::string ServerMetrics::render(const MetricsGauges& g) const {
  std::lock_guard lock(mu_);
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  metric("deltafin_requests_total", "counter", "Finished HTTP requests by status (499: the client left first).");
  for (const auto& [status, n] : by_status_) out += fmt::format("deltafin_requests_total{{status=\"{}\"}} {}\n", status, n);
  metric("deltafin_queue_length", "gauge", "Generation requests waiting for the generation slot.");
  out += fmt::format("deltafin_queue_length {}\n", g.queue_length);
  metric("deltafin_queue_capacity", "gauge", "Most requests that may wait (--queue).");
  out += fmt::format("deltafin_queue_capacity {}\n", g.queue_capacity);
  metric("deltafin_queue_wait_seconds", "summary", "Time requests waited in the queue before generating.");
  out += fmt::format("deltafin_queue_wait_seconds_sum {:.6f}\ndeltafin_queue_wait_seconds_count {}\n", wait_sum_,
                     wait_count_);
  metric("deltafin_queue_rejected_total", "counter", "Requests refused with 429 because the queue was full.");
  out += fmt::format("deltafin_queue_rejected_total {}\n", queue_rejected.load());
  metric("deltafin_queue_abandoned_total", "counter", "Requests whose client left while they waited.");
  out += fmt::format("deltafin_queue_abandoned_total {}\n", queue_abandoned.load());
  metric("deltafin_generation_running", "gauge", "1 while a generation holds the slot.");
  out += fmt::format("deltafin_generation_running {}\n", g.generation_running ? 1 : 0);
  metric("deltafin_generations_total", "counter", "Generations that ran to their end.");
  out += fmt::format("deltafin_generations_total {}\n", generations_);
  metric("deltafin_generations_cancelled_total", "counter", "Generations stopped early (client gone, shutdown).");
  out += fmt::format("deltafin_generations_cancelled_total {}\n", cancelled.load());
  metric("deltafin_memo_hits_total", "counter", "Requests answered from the exact response memo.");
  out += fmt::format("deltafin_memo_hits_total {}\n", memo_hits.load());
  metric("deltafin_prompt_tokens_total", "counter", "Prompt tokens of finished generations (tokens in).");
  out += fmt::format("deltafin_prompt_tokens_total {}\n", prompt_);
  metric("deltafin_prefill_tokens_total", "counter", "Prompt tokens that were prefilled (not reused).");
  out += fmt::format("deltafin_prefill_tokens_total {}\n", prefill_);
  metric("deltafin_cached_tokens_total", "counter", "Prompt tokens reused from retained conversation state.");
  out += fmt::format("deltafin_cached_tokens_total {}\n", cached_);
  metric("deltafin_completion_tokens_total", "counter", "Generated tokens of finished generations (tokens out).");
  out += fmt::format("deltafin_completion_tokens_total {}\n", completion_);
  metric("deltafin_prefill_seconds_total", "counter", "Time spent in prefill.");
  out += fmt::format("deltafin_prefill_seconds_total {:.6f}\n", prefill_s_);
  metric("deltafin_decode_seconds_total", "counter", "Time spent decoding.");
  out += fmt::format("deltafin_decode_seconds_total {:.6f}\n", decode_s_);
  metric("deltafin_expert_bytes_total", "counter",
         "Routed expert bytes used by finished generations (each block's union once; from a store: read or cached).");
  out += fmt::format("deltafin_expert_bytes_total {}\n", expert_bytes_);
  metric("deltafin_expert_wait_seconds_total", "counter", "Compute time spent waiting for expert reads.");
  out += fmt::format("deltafin_expert_wait_seconds_total {:.6f}\n", expert_wait_s_);
  metric("deltafin_decode_passes_total", "counter",
         "Decode passes of the target (one per token without drafting; fewer when drafts are accepted).");
  out += fmt::format("deltafin_decode_passes_total {}\n", target_passes_);
  metric("deltafin_draft_proposed_tokens_total", "counter", "Draft tokens the target verified.");
  out += fmt::format("deltafin_draft_proposed_tokens_total {}\n", draft_proposed_);
  metric("deltafin_draft_accepted_tokens_total", "counter", "Draft tokens that equalled the target's own.");
  out += fmt::format("deltafin_draft_accepted_tokens_total {}\n", draft_accepted_);
  metric("deltafin_connections_open", "gauge", "Open client connections.");
  out += fmt::format("deltafin_connections_open {}\n", g.connections_open);
  metric("deltafin_connections_accepted_total", "counter", "Accepted TCP connections.");
  out += fmt::format("deltafin_connections_accepted_total {}\n", g.connections_accepted);
  metric("deltafin_connections_reclaimed_total", "counter",
         "Connections closed while reading a head or body to make room under a connection limit.");
  out += fmt::format("deltafin_connections_reclaimed_total {}\n", g.connections_reclaimed);
  metric("deltafin_connections_refused_total", "counter", "Connections refused with 503 (limits, nothing to reclaim).");
  out += fmt::format("deltafin_connections_refused_total {}\n", g.connections_refused);
  return out;
}

}  // namespace deltafin::server
