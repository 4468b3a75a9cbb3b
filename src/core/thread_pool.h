// A fixed pool of worker threads for data-parallel loops. Work is split over
// independent outputs only (rows of a matrix product, heads), never over a
// reduction, so results do not depend on the number of threads.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
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
  // a multiple of `grain`; blocks until all are done.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunk_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace deltafin
