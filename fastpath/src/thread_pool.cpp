#include "cgad/fastpath/thread_pool.hpp"

#include "cgad/reference/errors.hpp"

#include <algorithm>
#include <exception>
#include <string>

namespace cgad::fastpath {

ThreadPool::ThreadPool(unsigned threads)
    : threads_(threads == 0 ? std::max(1u, std::min(std::thread::hardware_concurrency(), kMaxThreads)) : threads) {
  if (threads_ > kMaxThreads) {
    throw reference::InputError("threads must be at most " + std::to_string(kMaxThreads) + " (the step is bound by "
                                "memory bandwidth, and every step wakes every thread), got " + std::to_string(threads));
  }
  const unsigned wanted = threads_;
  try {
    workers_.reserve(wanted - 1);
    for (unsigned i = 1; i < wanted; ++i) workers_.emplace_back([this, i] { worker(i); });
  } catch (const std::exception& e) {
    if (threads != 0) {
      // A thread could not be created (memory, RLIMIT_NPROC, ulimit -v): the ones already running wait on start_,
      // and leaving them there would hang in the condition variable's destructor (or std::terminate on a
      // joinable std::thread). Stop and join them, then say so.
      stop_workers();
      throw reference::InputError("cannot start " + std::to_string(wanted) + " threads (" + e.what() +
                                  "); ask for fewer");
    }
    // Picked for the caller (threads = 0): run with the workers that did start, plus the caller's thread. They
    // have run nothing yet, and read threads_ only under the mutex once a job is posted.
    threads_ = static_cast<unsigned>(workers_.size()) + 1;
  }
}

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& thread : workers_) {
    if (thread.joinable()) thread.join();
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::run_part(unsigned part) {
  // Part p covers [⌊p·count/T⌋, ⌊(p+1)·count/T⌋); the 128-bit product cannot overflow.
  const auto bound = [this](unsigned p) {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(count_) * p / threads_);
  };
  const std::uint64_t begin = bound(part);
  const std::uint64_t end = bound(part + 1);
  if (begin < end) job_(context_, begin, end);
}

void ThreadPool::run(std::uint64_t count, Job job, const void* context) {
  if (count == 0) return;
  if (threads_ == 1) {
    job(context, 0, count);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = job;
    context_ = context;
    count_ = count;
    pending_ = threads_ - 1;
    ++generation_;
  }
  start_.notify_all();
  run_part(0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::worker(unsigned index) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_part(index);
    {
      std::lock_guard lock(mutex_);
      --pending_;
    }
    done_.notify_one();
  }
}

}  // namespace cgad::fastpath
