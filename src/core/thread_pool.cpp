#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DF_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define DF_CPU_RELAX() asm volatile("yield")
#else
#define DF_CPU_RELAX() ((void)0)
#endif

namespace deltafin {

namespace {
// True on a pool's worker threads, and on a caller while it runs a job.
thread_local bool t_in_job = false;

using Clock = std::chrono::steady_clock;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  t_in_job = true;
  uint32_t seen = 0;  // the constructor's value: a job posted before this thread ran is not missed
  for (;;) {
    // Spin for the next job, then park. parked_ is raised before the last
    // look at generation_, and the caller bumps generation_ before it reads
    // parked_ (both sequentially consistent), so a job is never missed.
    uint32_t now = generation_.load(std::memory_order_acquire);
    if (now == seen) {
      const auto until = Clock::now() + std::chrono::duration<double>(kSpinSeconds);
      for (int spins = 0; (now = generation_.load(std::memory_order_acquire)) == seen; ++spins) {
        DF_CPU_RELAX();
        if ((spins & 63) == 63 && Clock::now() > until) break;
      }
      while (now == seen) {
        parked_.fetch_add(1);
        if (generation_.load() == seen) generation_.wait(seen);
        parked_.fetch_sub(1);
        now = generation_.load(std::memory_order_acquire);
      }
    }
    seen = now;
    if (stop_.load()) return;
    const size_t b = size_t(index) * job_chunk_;
    if (b < job_n_) call_(fn_, b, std::min(job_n_, b + job_chunk_));
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::dispatch(size_t n, size_t grain, Call call, const void* fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t parts = size_t(size());
  size_t chunk = (n + parts - 1) / parts;
  chunk = (chunk + grain - 1) / grain * grain;
  if (workers_.empty() || chunk >= n || t_in_job) {
    call(fn, 0, n);
    return;
  }
  call_ = call;
  fn_ = fn;
  job_n_ = n;
  job_chunk_ = chunk;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);  // publishes the job (sequentially consistent)
  if (parked_.load() > 0) generation_.notify_all();
  t_in_job = true;
  call(fn, 0, std::min(n, chunk));
  t_in_job = false;
  // The workers' chunks are about as long as ours: spin, yielding now and
  // then in case a worker lost its core.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    DF_CPU_RELAX();
    if ((spins & 1023) == 1023) std::this_thread::yield();
  }
}

}  // namespace deltafin
