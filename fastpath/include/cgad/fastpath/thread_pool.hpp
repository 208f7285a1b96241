#pragma once
// A fixed set of worker threads that run one range-splitting job at a time. Work is split into contiguous
// ranges of equal size, one per thread; because every block of a step is independent, the result does not
// depend on the split (the thread-count invariance test checks the bits). Dispatch allocates nothing: the
// job is a function pointer and a context pointer.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace cgad::fastpath {

class ThreadPool {
 public:
  // The most threads a pool takes: a step is bound by memory bandwidth, which a few dozen cores saturate, and
  // each step wakes every thread (3000 threads made a quick benchmark run past two minutes).
  static constexpr unsigned kMaxThreads = 256;

  // `threads` = 0 picks std::thread::hardware_concurrency() (at most kMaxThreads; fewer if the system cannot
  // start that many); 1 runs everything on the caller. An explicit count above kMaxThreads, or one the system
  // cannot start, is an InputError -- after every thread already started has been joined.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned threads() const { return threads_; }

  // Calls body(begin, end) over a split of [0, count) and returns when all parts are done.
  template <class Body>
  void parallel_for(std::uint64_t count, const Body& body) {
    run(count, [](const void* context, std::uint64_t begin, std::uint64_t end) {
      (*static_cast<const Body*>(context))(begin, end);
    }, &body);
  }

 private:
  using Job = void (*)(const void*, std::uint64_t, std::uint64_t);
  void run(std::uint64_t count, Job job, const void* context);
  void worker(unsigned index);
  void run_part(unsigned part);
  void stop_workers() noexcept;

  unsigned threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  std::uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
  Job job_ = nullptr;
  const void* context_ = nullptr;
  std::uint64_t count_ = 0;
};

}  // namespace cgad::fastpath
