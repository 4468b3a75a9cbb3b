#include "hub/retry.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace deltafin::hub {

Status check_retry_policy(const RetryPolicy& p) {
  if (p.retries < 0 || p.retries > 1000) return error("--retries {}: expected 0..1000", p.retries);
  if (p.backoff_ms < 0 || p.backoff_ms > kMaxBackoffMs)
    return error("--retry-backoff-ms {}: expected 0..{}", p.backoff_ms, kMaxBackoffMs);
  if (p.stall_timeout_s < 1 || p.stall_timeout_s > 3600)
    return error("--stall-timeout {}: expected 1..3600 seconds", p.stall_timeout_s);
  return {};
}

bool retryable_status(long status) { return status == 408 || status == 429 || (status >= 500 && status != 501); }

int64_t backoff_before_retry(const RetryPolicy& p, int n, long retry_after_s) {
  int64_t wait = p.backoff_ms;
  for (int i = 1; i < n && wait < kMaxBackoffMs; ++i) wait *= 2;
  wait = std::min(wait, kMaxBackoffMs);
  if (retry_after_s > 0) wait = std::max(wait, std::min<int64_t>(int64_t(retry_after_s) * 1000, kMaxBackoffMs));
  return wait;
}

namespace {

// An environment variable as an int in [lo, hi]; unset or empty leaves `*v`.
Status env_int(const char* name, int lo, int hi, int* v) {
  const char* s = std::getenv(name);
  if (!s || !*s) return {};
  char* end = nullptr;
  const long x = std::strtol(s, &end, 10);
  if (*end != '\0' || x < lo || x > hi) return error("{}={}: expected a whole number in {}..{}", name, s, lo, hi);
  *v = int(x);
  return {};
}

}  // namespace

Result<RetryPolicy> retry_policy_from_env(RetryPolicy p) {
  DF_TRY(env_int("DELTAFIN_FETCH_RETRIES", 0, 1000, &p.retries));
  DF_TRY(env_int("DELTAFIN_FETCH_STALL_TIMEOUT", 1, 3600, &p.stall_timeout_s));
  DF_TRY(env_int("DELTAFIN_FETCH_RETRY_BACKOFF_MS", 0, int(kMaxBackoffMs), &p.backoff_ms));
  return p;
}

std::string gave_up_note(int retries) { return fmt::format(" (gave up after {} retries)", retries); }

bool gave_up(const Status& s) {
  const std::string& m = s.message();
  const size_t at = m.find(" (gave up after ");
  return at != std::string::npos && m.find(" retries)", at) != std::string::npos;
}

std::string retry_note(const RetryPolicy& p, int n, int64_t wait_ms) {
  return fmt::format("retry {} of {} in {:.1f} s", n, p.retries, double(wait_ms) / 1000.0);
}

Status run_with_retries(const RetryPolicy& p, const std::function<Attempt()>& attempt,
                        const std::function<void(int, const Status&, int64_t)>& on_retry,
                        const std::atomic<bool>* stop, int* retries_used) {
  for (int n = 0;; ++n) {
    if (retries_used) *retries_used = n;
    Attempt a = attempt();
    if (a.status.ok() || !a.retryable || n >= p.retries || (stop && stop->load())) return a.status;
    const int64_t wait = backoff_before_retry(p, n + 1, a.retry_after_s);
    if (on_retry) on_retry(n + 1, a.status, wait);
    // In slices, so that another worker's failure ends the wait.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait);
    while (std::chrono::steady_clock::now() < until) {
      if (stop && stop->load()) return a.status;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
    }
  }
}

Result<HttpReply> get_with_retries(HttpClient& http, const std::string& url,
                                   std::optional<std::pair<uint64_t, uint64_t>> range, uint64_t max_body,
                                   const RetryPolicy& p, const std::function<void(const std::string&)>& log) {
  std::optional<HttpReply> last;
  int used = 0;
  Status st = run_with_retries(
      p,
      [&]() -> Attempt {
        last.reset();
        auto r = http.get(url, range, max_body);
        if (!r.ok()) return {r.status(), http.last_retryable(), 0};
        last = std::move(*r);
        if (!retryable_status(last->status)) return {};
        return {Status::error(describe_http_failure(url, *last)), true, http.last_retry_after()};
      },
      [&](int n, const Status& why, int64_t wait) {
        if (log) log(fmt::format("{}; {}", why.message(), retry_note(p, n, wait)));
      },
      nullptr, &used);
  if (st.ok()) return std::move(*last);  // any status but a retryable one
  if (last || http.last_retryable()) return Status::error(st.message() + gave_up_note(used));
  return st;  // no reply worth a retry (a body over max_body)
}

}  // namespace deltafin::hub
