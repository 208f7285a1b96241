#include "cgad/fastpath/thread_pool.hpp"

#include "cgad/core/errors.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cgad::fastpath {
namespace {

// How long a thread that waits for the crew (a worker for the next job, the caller for the parts still running, a
// part at a barrier) spins before it sleeps on a condition variable (docs/design.md §5, "One dispatch per step"). A
// sleep and its wake-up cost a futex call each side, tens of microseconds on a loaded VM; a step's parts end within
// a few microseconds of each other. Past the bound the thread sleeps, so an idle pool takes no CPU from the user's
// own threads.
constexpr auto kSpin = std::chrono::microseconds(50);

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins until done() holds or kSpin has passed; whether it holds. The clock is read every 64 pauses only.
template <class Done>
bool spin_until(const Done& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (unsigned n = 1;; ++n) {
    if (done()) return true;
    relax();
    if (n % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

// The caller posts a job by moving `generation` (the job's fields are written before it, and read after it is seen);
// each worker runs its part and counts `pending` down. Every wait spins first, then sleeps on `mutex` with a
// condition variable; whoever ends a wait notifies under the mutex, so a sleeper cannot miss it.
struct ThreadPool::Crew {
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable start;
  std::condition_variable done;
  std::condition_variable crossed;
  std::atomic<std::uint64_t> generation{0};
  std::atomic<unsigned> pending{0};
  std::atomic<bool> stopping{false};
  unsigned parts = 1;
  Job job = nullptr;
  const void* context = nullptr;
  std::uint64_t count = 0;
  bool every_part = false;  // run parts of empty ranges too (a job that meets at a barrier)
  // The barrier of a job's parts: `arrived` counts the parts at it, `phase` moves when the last arrives.
  std::atomic<unsigned> arrived{0};
  std::atomic<std::uint64_t> phase{0};

  void run_part(unsigned part) {
    // Part p covers [⌊p·count/T⌋, ⌊(p+1)·count/T⌋); the 128-bit product cannot overflow.
    const auto bound = [this](unsigned p) {
      return static_cast<std::uint64_t>(static_cast<unsigned __int128>(count) * p / parts);
    };
    const std::uint64_t begin = bound(part);
    const std::uint64_t end = bound(part + 1);
    if (begin < end || every_part) job(context, begin, end, this);
  }

  void meet() {
    const std::uint64_t at = phase.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) {
      arrived.store(0, std::memory_order_relaxed);
      {
        std::lock_guard lock(mutex);
        phase.store(at + 1, std::memory_order_release);
      }
      crossed.notify_all();
      return;
    }
    const auto moved = [&] { return phase.load(std::memory_order_acquire) != at; };
    if (spin_until(moved)) return;
    std::unique_lock lock(mutex);
    crossed.wait(lock, moved);
  }

  void work(unsigned index) {
    std::uint64_t seen = 0;
    for (;;) {
      const auto posted = [&] {
        return stopping.load(std::memory_order_acquire) || generation.load(std::memory_order_acquire) != seen;
      };
      if (!spin_until(posted)) {
        std::unique_lock lock(mutex);
        start.wait(lock, posted);
      }
      if (stopping.load(std::memory_order_acquire)) return;
      seen = generation.load(std::memory_order_acquire);
      run_part(index);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        { std::lock_guard lock(mutex); }  // the caller, if asleep, is waiting on `done`: it sees pending = 0
        done.notify_one();
      }
    }
  }
};

void ThreadPool::Barrier::wait() const {
  if (crew_ != nullptr) crew_->meet();
}

ThreadPool::ThreadPool(unsigned threads)
    : threads_(threads == 0 ? std::max(1u, std::min(std::thread::hardware_concurrency(), kMaxThreads)) : threads),
      pid_(::getpid()) {
  if (threads_ > kMaxThreads) {
    throw core::InputError("threads must be at most " + std::to_string(kMaxThreads) +
                           " (the step is bound by "
                           "memory bandwidth, and every step wakes every thread), got " +
                           std::to_string(threads));
  }
  const unsigned wanted = threads_;
  const std::string failed = start_crew();
  if (!failed.empty() && threads != 0) {
    // A thread could not be created (memory, RLIMIT_NPROC, ulimit -v): the ones already running wait on the
    // crew's start, and leaving them there would hang in the condition variable's destructor (or std::terminate
    // on a joinable std::thread). Stop and join them, then say so.
    stop_crew();
    throw core::InputError("cannot start " + std::to_string(wanted) + " threads (" + failed + "); ask for fewer");
  }
}

std::string ThreadPool::start_crew() {
  crew_ = std::make_unique<Crew>();
  crew_->parts = threads_;
  if (threads_ == 1) return "";
  Crew* crew = crew_.get();
  try {
    crew->workers.reserve(threads_ - 1);
    for (unsigned i = 1; i < threads_; ++i) crew->workers.emplace_back([crew, i] { crew->work(i); });
  } catch (const std::exception& e) {
    // Picked for the caller (threads = 0), or restarted after fork: run with the workers that did start, plus
    // the caller's thread. They have run nothing yet, and read `parts` only once a job is posted.
    threads_ = static_cast<unsigned>(crew->workers.size()) + 1;
    crew->parts = threads_;
    return e.what();
  }
  return "";
}

void ThreadPool::stop_crew() noexcept {
  {
    std::lock_guard lock(crew_->mutex);
    crew_->stopping.store(true, std::memory_order_release);
  }
  crew_->start.notify_all();
  for (auto& thread : crew_->workers) {
    if (thread.joinable()) thread.join();
  }
}

ThreadPool::~ThreadPool() {
  // In a forked child that never ran a job the crew's threads are the parent's: leave them (see run()).
  if (::getpid() != pid_) {
    static_cast<void>(crew_.release());
    return;
  }
  stop_crew();
}

void ThreadPool::run(std::uint64_t count, Job job, const void* context, bool every_part) {
  std::lock_guard turn(callers_);
  if (::getpid() != pid_) {
    // A forked child: the crew's threads are the parent's and do not run here. Their handles can be neither
    // joined nor destroyed (std::terminate on a joinable std::thread), and the crew's mutex and condition
    // variables may hold the parent's waiters, so the old crew is released unfreed -- a few hundred bytes per
    // fork -- and a new one started.
    static_cast<void>(crew_.release());
    pid_ = ::getpid();
    static_cast<void>(start_crew());
  }
  Crew& crew = *crew_;
  if (threads_ == 1) {
    job(context, 0, count, nullptr);
    return;
  }
  dispatches_.fetch_add(1, std::memory_order_relaxed);
  crew.job = job;
  crew.context = context;
  crew.count = count;
  crew.every_part = every_part;
  crew.pending.store(threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard lock(crew.mutex);
    crew.generation.fetch_add(1, std::memory_order_release);  // publishes the fields above to the workers
  }
  crew.start.notify_all();
  crew.run_part(0);
  const auto finished = [&] { return crew.pending.load(std::memory_order_acquire) == 0; };
  if (spin_until(finished)) return;
  std::unique_lock lock(crew.mutex);
  crew.done.wait(lock, finished);
}

}  // namespace cgad::fastpath
