#include "cgad/fastpath/thread_pool.hpp"

#include <algorithm>

namespace cgad::fastpath {

ThreadPool::ThreadPool(unsigned threads)
    : threads_(threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads) {
  workers_.reserve(threads_ - 1);
  for (unsigned i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& thread : workers_) thread.join();
}

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
