// A fixed pool of worker threads for data-parallel loops. Work is split over
// independent outputs only (rows of a matrix product, heads, channels), never
// over a reduction, so results do not depend on the number of threads.
//
// Decode dispatches a few hundred small loops per token, so a dispatch must
// cost microseconds, not a wake-up through the scheduler: workers spin on the
// job counter for a short while after each job (kSpinSeconds) and only then
// park on a futex; the caller spins while the last chunks finish. The loop
// body is passed by reference (no std::function, no allocation per call).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace deltafin {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1; the caller counts as one
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) split into contiguous chunks whose size is
  // a multiple of `grain` (at most one chunk per thread; the caller runs the
  // first); blocks until all are done. Called from inside a job it runs the
  // whole range on the calling thread.
  template <class Fn>
  void parallel_for(size_t n, size_t grain, const Fn& fn) {
    dispatch(n, grain, [](const void* f, size_t b, size_t e) { (*static_cast<const Fn*>(f))(b, e); }, &fn);
  }

  // How long an idle worker spins before it parks (a decode step's loops
  // follow each other within microseconds; between tokens it parks).
  static constexpr double kSpinSeconds = 100e-6;

 private:
  using Call = void (*)(const void* fn, size_t begin, size_t end);
  void dispatch(size_t n, size_t grain, Call call, const void* fn);
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  // The current job; written by the caller before `generation_` moves on.
  Call call_ = nullptr;
  const void* fn_ = nullptr;
  size_t job_n_ = 0, job_chunk_ = 0;
  std::atomic<uint32_t> generation_{0};  // bumped once per job (futex word)
  std::atomic<int> pending_{0};          // workers still running the job
  std::atomic<int> parked_{0};           // workers asleep on generation_
  std::atomic<bool> stop_{false};
};

}  // namespace deltafin
