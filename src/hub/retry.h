// What setup and a streamed store's expert fetches do when the network fails:
// a request that fails with no reply (a reset, a stall, a refused
// connection) or with 408, 429 or a 5xx is tried again after a backoff, up to
// a bounded number of retries, each continuing from the last byte written;
// one log line per retry. A 4xx refusal is never retried.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "core/result.h"
#include "hub/http.h"

namespace deltafin::hub {

struct RetryPolicy {
  int retries = 5;           // per request stream: a chunk, a spine range, an expert's piece
  int backoff_ms = 1000;     // the first wait; doubled for each further retry, at most kMaxBackoffMs
  int stall_timeout_s = 30;  // no byte (or under 1 KiB/s) for this long is a stall: a failure, retried
};
inline constexpr int64_t kMaxBackoffMs = 60'000;

// Refuses values out of range, naming the option (`--retries`, ...).
Status check_retry_policy(const RetryPolicy& p);

// HTTP statuses worth a retry: 408, 429 and 5xx (not 501: the server cannot, ever).
bool retryable_status(long status);

// The wait before retry `n` (1-based): backoff_ms * 2^(n-1), at most
// kMaxBackoffMs; a longer Retry-After from the server (seconds) is honoured
// up to the same bound.
int64_t backoff_before_retry(const RetryPolicy& p, int n, long retry_after_s = 0);

// `base` with the environment's overrides, for the fetches of `run` and
// `serve` on a streamed store (they take no setup options):
// DELTAFIN_FETCH_RETRIES, DELTAFIN_FETCH_STALL_TIMEOUT (seconds),
// DELTAFIN_FETCH_RETRY_BACKOFF_MS. A value that is not a number in range is an error.
Result<RetryPolicy> retry_policy_from_env(RetryPolicy base);

// One try's outcome, for run_with_retries.
struct Attempt {
  Status status;
  bool retryable = false;
  long retry_after_s = 0;
};

// Calls `attempt` until it succeeds, fails in a way not worth a retry, `stop`
// is set, or p.retries retries are spent. Before retry n: `on_retry(n, why,
// wait_ms)` (the caller's one log line), then the wait (cut short by `stop`).
// Returns the last try's status; `*retries_used` (if given) counts the retries.
Status run_with_retries(const RetryPolicy& p, const std::function<Attempt()>& attempt,
                        const std::function<void(int, const Status&, int64_t)>& on_retry,
                        const std::atomic<bool>* stop = nullptr, int* retries_used = nullptr);

// A GET of a small document (a listing, a header) with the policy: a reply
// with a retryable status or no reply at all is tried again, one log line
// each. Any other reply is returned (the caller judges its status); a
// failure that outlasts the retries is an error with gave_up_note.
Result<HttpReply> get_with_retries(HttpClient& http, const std::string& url,
                                   std::optional<std::pair<uint64_t, uint64_t>> range, uint64_t max_body,
                                   const RetryPolicy& p, const std::function<void(const std::string&)>& log);

// " (gave up after 3 retries)": what a network failure that outlasted the
// policy carries in its message, and the test for it (such a failure is
// worth a rerun, once the network is back; a refusal is not).
std::string gave_up_note(int retries);
bool gave_up(const Status& s);

// "retry 2 of 5 in 2.0 s": the tail of every retry's log line.
std::string retry_note(const RetryPolicy& p, int n, int64_t wait_ms);

}  // namespace deltafin::hub
