// setup's retry policy without a server: which statuses are retried, the
// backoff's doubling, bound and Retry-After, the policy's ranges and its
// environment overrides, the retry loop's counting and stop, and a download
// record's partial chunk (the bytes a chunk got before its retries ran out,
// kept for the rerun). The network faults themselves are tested against a
// local server in tests/e2e/setup_network_faults.sh.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "hub/download.h"
#include "hub/retry.h"
#include "test_models.h"

namespace deltafin::hub {
namespace {

namespace fs = std::filesystem;

TEST(HubRetry, RetryableStatuses) {
  for (long s : {408L, 429L, 500L, 502L, 503L, 504L}) EXPECT_TRUE(retryable_status(s)) << s;
  for (long s : {200L, 206L, 301L, 400L, 401L, 403L, 404L, 416L, 501L}) EXPECT_FALSE(retryable_status(s)) << s;
}

TEST(HubRetry, BackoffDoublesUpToTheBoundAndHonoursRetryAfter) {
  RetryPolicy p;
  p.backoff_ms = 300;
  EXPECT_EQ(backoff_before_retry(p, 1), 300);
  EXPECT_EQ(backoff_before_retry(p, 2), 600);
  EXPECT_EQ(backoff_before_retry(p, 4), 2400);
  EXPECT_EQ(backoff_before_retry(p, 40), kMaxBackoffMs);   // no overflow, bounded
  EXPECT_EQ(backoff_before_retry(p, 1, 5), 5000);          // the server's longer wait
  EXPECT_EQ(backoff_before_retry(p, 4, 1), 2400);          // a shorter one does not cut ours
  EXPECT_EQ(backoff_before_retry(p, 1, 86400), kMaxBackoffMs);
  p.backoff_ms = 0;
  EXPECT_EQ(backoff_before_retry(p, 3), 0);
}

TEST(HubRetry, PolicyRangesNameTheOption) {
  EXPECT_TRUE(check_retry_policy(RetryPolicy{}).ok());
  RetryPolicy p;
  p.retries = -1;
  EXPECT_NE(check_retry_policy(p).message().find("--retries -1"), std::string::npos);
  p = {};
  p.stall_timeout_s = 0;
  EXPECT_NE(check_retry_policy(p).message().find("--stall-timeout 0"), std::string::npos);
  p = {};
  p.backoff_ms = int(kMaxBackoffMs) + 1;
  EXPECT_NE(check_retry_policy(p).message().find("--retry-backoff-ms"), std::string::npos);
}

// Sets an environment variable for one scope.
struct Env {
  const char* name;
  Env(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~Env() { ::unsetenv(name); }
};

TEST(HubRetry, EnvironmentOverridesForStreamedFetches) {
  {
    Env a("DELTAFIN_FETCH_RETRIES", "7"), b("DELTAFIN_FETCH_STALL_TIMEOUT", "3"),
        c("DELTAFIN_FETCH_RETRY_BACKOFF_MS", "25");
    auto p = retry_policy_from_env(RetryPolicy{});
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p->retries, 7);
    EXPECT_EQ(p->stall_timeout_s, 3);
    EXPECT_EQ(p->backoff_ms, 25);
  }
  auto d = retry_policy_from_env(RetryPolicy{});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->retries, RetryPolicy{}.retries);
  for (const char* bad : {"x", "5s", "-1", "100000"}) {
    Env a("DELTAFIN_FETCH_RETRIES", bad);
    auto p = retry_policy_from_env(RetryPolicy{});
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.message().find("DELTAFIN_FETCH_RETRIES"), std::string::npos) << p.message();
  }
}

TEST(HubRetry, LoopRetriesTheRetryableUpToTheBound) {
  RetryPolicy p;
  p.retries = 3;
  p.backoff_ms = 0;
  int calls = 0, used = -1;
  std::vector<int> logged;
  auto log = [&](int n, const Status& why, int64_t) {
    logged.push_back(n);
    EXPECT_EQ(why.message(), "reset");
  };
  // Always failing, retryably: 1 + 3 tries, 3 lines.
  Status s = run_with_retries(
      p, [&]() -> Attempt { ++calls; return {Status::error("reset"), true, 0}; }, log, nullptr, &used);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(logged, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(used, 3);
  // Success on the third try.
  calls = 0;
  logged.clear();
  s = run_with_retries(
      p, [&]() -> Attempt { return ++calls < 3 ? Attempt{Status::error("reset"), true, 0} : Attempt{}; }, log, nullptr,
      &used);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(used, 2);
  // A refusal: no retry.
  calls = 0;
  logged.clear();
  s = run_with_retries(p, [&]() -> Attempt { ++calls; return {Status::error("404"), false, 0}; }, log, nullptr, &used);
  EXPECT_EQ(s.message(), "404");
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(logged.empty());
}

TEST(HubRetry, StopEndsTheWait) {
  RetryPolicy p;
  p.retries = 5;
  p.backoff_ms = int(kMaxBackoffMs);  // a minute: only the stop ends it
  std::atomic<bool> stop{false};
  int calls = 0;
  Status s = run_with_retries(
      p, [&]() -> Attempt { ++calls; return {Status::error("reset"), true, 0}; },
      [&](int, const Status&, int64_t) { stop = true; }, &stop);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(calls, 1);
}

TEST(HubRetry, RecordKeepsAPartialChunk) {
  const fs::path d = testing::temp_dir("hub_retry_record");
  RemoteFile f;
  f.path = "model.safetensors";
  f.size = 10000;
  f.sha256 = std::string(64, 'a');
  const std::string rec = (d / "r.json").string();
  auto write = [&](const std::string& text) { std::ofstream(rec) << text; };
  const std::string head = R"({"size": 10000, "digest": "sha256:)" + f.sha256 + R"(", "chunk": 4096, "done": "100")";
  write(head + "}");
  EXPECT_EQ(recorded_bytes(f, rec, 4096), 4096u);
  write(head + R"(, "partial": {"1": 1000, "2": 5}})");
  EXPECT_EQ(recorded_bytes(f, rec, 4096), 4096u + 1000u + 5u);
  write(head + R"(, "partial": {"0": 7}})");  // a finished chunk's partial entry counts once
  EXPECT_EQ(recorded_bytes(f, rec, 4096), 4096u);
  write(head + R"(, "partial": {"2": 1808}})");  // the last chunk has 1808 bytes: not partial
  EXPECT_EQ(recorded_bytes(f, rec, 4096), 0u);
  write(head + R"(, "partial": {"9": 1}})");  // no such chunk: the record is not trusted
  EXPECT_EQ(recorded_bytes(f, rec, 4096), 0u);
  write(head + R"(, "partial": {"x": 1}})");
  EXPECT_EQ(recorded_bytes(f, rec, 4096), 0u);
  EXPECT_EQ(recorded_bytes(f, rec, 2048), 0u);  // another chunking
}

}  // namespace
}  // namespace deltafin::hub
