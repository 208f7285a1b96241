#pragma once
// A fixed set of worker threads that run one range-splitting job at a time. Work is split into contiguous
// ranges of equal size, one per thread; because every block of a step is independent, the result does not
// depend on the split (the thread-count invariance test checks the bits). Dispatch allocates nothing: the
// job is a function pointer and a context pointer.
//
// Callers on several threads take turns: a run waits for the one in progress to end (the job, its context and
// the count of parts still running serve one caller at a time). After fork() the child has none of the workers
// (only the forking thread is copied), so the first run in a child starts a new set; the parent's are left
// behind unjoined, as they do not exist there. A fork while another thread of the parent is inside run() is
// not supported: the child's copy of that run is half done and its lock held.
#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
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

  // Calls body(begin, end) over a split of [0, count) and returns when all parts are done. A count under
  // `serial_below` runs on the caller in one part: waking the crew costs more than splitting such a count saves
  // (the caller's measured threshold; the split never changes a result).
  template <class Body>
  void parallel_for(std::uint64_t count, const Body& body, std::uint64_t serial_below = 0) {
    if (count < serial_below) {
      if (count != 0) body(std::uint64_t{0}, count);
      return;
    }
    run(
        count,
        [](const void* context, std::uint64_t begin, std::uint64_t end) {
          (*static_cast<const Body*>(context))(begin, end);
        },
        &body);
  }

 private:
  using Job = void (*)(const void*, std::uint64_t, std::uint64_t);
  struct Crew;  // the workers and what they share with the caller (thread_pool.cpp)

  void run(std::uint64_t count, Job job, const void* context);
  // Starts workers 1 .. threads_ - 1 in a new crew; returns why a thread could not start, or "" when all did.
  std::string start_crew();
  void stop_crew() noexcept;

  unsigned threads_;
  std::mutex callers_;  // held for a whole run
  pid_t pid_;           // the process the crew's threads run in
  std::unique_ptr<Crew> crew_;
};

}  // namespace cgad::fastpath
