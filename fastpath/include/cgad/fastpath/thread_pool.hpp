#pragma once
// A fixed set of worker threads that run one range-splitting job at a time. Work is split into contiguous
// ranges of equal size, one per thread; because every block of a step is independent, the result does not
// depend on the split (the thread-count invariance test checks the bits). Dispatch allocates nothing: the
// job is a function pointer and a context pointer. Every wait (a worker's for a job, the caller's for the parts,
// a part's at a barrier) spins for a few tens of microseconds before it sleeps (thread_pool.cpp).
//
// Callers on several threads take turns: a run waits for the one in progress to end (the job, its context and
// the count of parts still running serve one caller at a time). After fork() the child has none of the workers
// (only the forking thread is copied), so the first run in a child starts a new set; the parent's are left
// behind unjoined, as they do not exist there. A fork while another thread of the parent is inside run() is
// not supported: the child's copy of that run is half done and its lock held.
#include <sys/types.h>

#include <atomic>
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
  struct Crew;  // the workers and what they share with the caller (thread_pool.cpp)

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
    if (count == 0) return;
    run(
        count,
        [](const void* context, std::uint64_t begin, std::uint64_t end, Crew*) {
          (*static_cast<const Body*>(context))(begin, end);
        },
        &body, false);
  }

  // Where the parts of one job meet: wait() returns once every part of the job has called it (each part must call
  // it equally often). A job of one part (serial, or a pool of one thread) passes straight through.
  class Barrier {
   public:
    void wait() const;

   private:
    friend class ThreadPool;
    explicit Barrier(Crew* crew) : crew_(crew) {}
    Crew* crew_;
  };

  // parallel_for whose body(begin, end, barrier) may wait at the barrier: every part runs, an empty one too, each
  // on its own thread, so that work split in phases (a scan whose verdict the whole step needs, then the step)
  // costs one dispatch instead of one per phase.
  template <class Body>
  void parallel_phases(std::uint64_t count, const Body& body, std::uint64_t serial_below = 0) {
    if (count < serial_below) {
      body(std::uint64_t{0}, count, Barrier(nullptr));
      return;
    }
    run(
        count,
        [](const void* context, std::uint64_t begin, std::uint64_t end, Crew* crew) {
          (*static_cast<const Body*>(context))(begin, end, Barrier(crew));
        },
        &body, true);
  }

  // How many jobs woke the crew since the pool started (a serial run or a pool of one thread wakes none): the
  // count of dispatches a step costs, which its tests and benchmarks read.
  std::uint64_t dispatches() const { return dispatches_.load(std::memory_order_relaxed); }

 private:
  // A part's body; the crew is null where the job runs in one part on the caller (its barrier then waits for none).
  using Job = void (*)(const void*, std::uint64_t, std::uint64_t, Crew*);

  // every_part: run the parts of empty ranges too (a job whose parts meet at a barrier).
  void run(std::uint64_t count, Job job, const void* context, bool every_part);
  // Starts workers 1 .. threads_ - 1 in a new crew; returns why a thread could not start, or "" when all did.
  std::string start_crew();
  void stop_crew() noexcept;

  unsigned threads_;
  std::mutex callers_;  // held for a whole run
  pid_t pid_;           // the process the crew's threads run in
  std::unique_ptr<Crew> crew_;
  std::atomic<std::uint64_t> dispatches_{0};
};

}  // namespace cgad::fastpath
