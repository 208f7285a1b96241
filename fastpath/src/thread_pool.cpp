#include "cgad/fastpath/thread_pool.hpp"

#include "cgad/core/errors.hpp"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <string>

namespace cgad::fastpath {

struct ThreadPool::Crew {
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable start;
  std::condition_variable done;
  std::uint64_t generation = 0;
  unsigned pending = 0;
  bool stopping = false;
  unsigned parts = 1;
  Job job = nullptr;
  const void* context = nullptr;
  std::uint64_t count = 0;

  void run_part(unsigned part) const {
    // Part p covers [⌊p·count/T⌋, ⌊(p+1)·count/T⌋); the 128-bit product cannot overflow.
    const auto bound = [this](unsigned p) {
      return static_cast<std::uint64_t>(static_cast<unsigned __int128>(count) * p / parts);
    };
    const std::uint64_t begin = bound(part);
    const std::uint64_t end = bound(part + 1);
    if (begin < end) job(context, begin, end);
  }

  void work(unsigned index) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex);
        start.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
      }
      run_part(index);
      {
        std::lock_guard lock(mutex);
        --pending;
      }
      done.notify_one();
    }
  }
};

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
    // the caller's thread. They have run nothing yet, and read `parts` only under the mutex once a job is posted.
    threads_ = static_cast<unsigned>(crew->workers.size()) + 1;
    crew->parts = threads_;
    return e.what();
  }
  return "";
}

void ThreadPool::stop_crew() noexcept {
  {
    std::lock_guard lock(crew_->mutex);
    crew_->stopping = true;
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

void ThreadPool::run(std::uint64_t count, Job job, const void* context) {
  if (count == 0) return;
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
    job(context, 0, count);
    return;
  }
  {
    std::lock_guard lock(crew.mutex);
    crew.job = job;
    crew.context = context;
    crew.count = count;
    crew.pending = threads_ - 1;
    ++crew.generation;
  }
  crew.start.notify_all();
  crew.run_part(0);
  std::unique_lock lock(crew.mutex);
  crew.done.wait(lock, [&] { return crew.pending == 0; });
}

}  // namespace cgad::fastpath
