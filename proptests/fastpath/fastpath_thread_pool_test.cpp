// The fast path's thread pool (fastpath/thread_pool.hpp) beyond one caller: several threads running jobs on one
// pool at once each get their own whole range, phased jobs' parts meet at their barrier, and a forked child's first
// job runs instead of waiting forever for workers that exist only in the parent. (The Python binding steps one
// optimizer from whichever thread calls it.)
#include "cgad/fastpath/thread_pool.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <thread>
#include <vector>

namespace cgad::fastpath {
namespace {

// Every element of [0, count) is visited once by this caller's body: the sum of the indices says so exactly.
bool covers_exactly(ThreadPool& pool, std::uint64_t count) {
  std::atomic<std::uint64_t> sum{0}, visited{0};
  pool.parallel_for(count, [&](std::uint64_t begin, std::uint64_t end) {
    std::uint64_t s = 0;
    for (std::uint64_t i = begin; i < end; ++i) s += i;
    sum += s;
    visited += end - begin;
  });
  return visited == count && sum == count * (count - 1) / 2;
}

TEST(FastpathThreadPool, ConcurrentCallersEachGetTheirWholeRange) {
  ThreadPool pool(4);
  constexpr int kCallers = 4, kRuns = 300;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRuns; ++r) {
        if (!covers_exactly(pool, 1000 + 17 * static_cast<std::uint64_t>(c) + static_cast<std::uint64_t>(r))) ++wrong;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A count under serial_below is one part on the caller's thread (the pool is not woken); from serial_below on, the
// pool splits it into one part per thread, covering the range exactly.
TEST(FastpathThreadPool, CountsUnderTheSerialThresholdRunOnTheCaller) {
  ThreadPool pool(4);
  const auto parts_of = [&](std::uint64_t count, std::uint64_t serial_below, bool& on_caller_only) {
    std::atomic<int> parts{0}, elsewhere{0};
    std::atomic<std::uint64_t> visited{0};
    const std::thread::id caller = std::this_thread::get_id();
    pool.parallel_for(
        count,
        [&](std::uint64_t begin, std::uint64_t end) {
          ++parts;
          visited += end - begin;
          if (std::this_thread::get_id() != caller) ++elsewhere;
        },
        serial_below);
    EXPECT_EQ(visited.load(), count);
    on_caller_only = elsewhere.load() == 0;
    return parts.load();
  };
  bool on_caller = false;
  EXPECT_EQ(parts_of(127, 128, on_caller), 1);
  EXPECT_TRUE(on_caller);
  EXPECT_EQ(parts_of(128, 128, on_caller), 4);
  EXPECT_FALSE(on_caller);
  EXPECT_EQ(parts_of(0, 128, on_caller), 0);
}

// parallel_phases: every part runs, an empty one too, and none passes the barrier before every part has reached it
// -- each part's writes before it are seen by every part after it, phase after phase, also when a part's range is
// empty (count under the thread count) and when the job runs serially on the caller. Many short jobs in a row
// cross the spin-then-sleep waits both ways (the workers spin, then sleep between the pauses).
TEST(FastpathThreadPool, PhasedPartsMeetAtEachBarrier) {
  ThreadPool pool(4);
  for (const std::uint64_t count : {0ull, 2ull, 4ull, 1000ull}) {
    for (int run = 0; run < 50; ++run) {
      std::atomic<int> parts{0}, reached{0}, early{0};
      std::atomic<std::uint64_t> visited{0};
      pool.parallel_phases(count, [&](std::uint64_t begin, std::uint64_t end, const ThreadPool::Barrier& barrier) {
        ++parts;
        visited += end - begin;
        for (int phase = 1; phase <= 3; ++phase) {
          ++reached;
          barrier.wait();
          if (reached.load() < 4 * phase) ++early;
          barrier.wait();  // no part counts the next phase before every part has read this one's count
        }
      });
      EXPECT_EQ(parts.load(), 4) << count;
      EXPECT_EQ(visited.load(), count);
      EXPECT_EQ(early.load(), 0) << count;
    }
    if (count == 1000) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: the crew sleeps
  }
  int serial_parts = 0;
  pool.parallel_phases(
      10,
      [&](std::uint64_t begin, std::uint64_t end, const ThreadPool::Barrier& barrier) {
        ++serial_parts;
        EXPECT_EQ(end - begin, 10u);
        barrier.wait();  // one part: passes straight through
      },
      128);
  EXPECT_EQ(serial_parts, 1);
}

// A pool of one thread, or a count under serial_below, wakes no crew; every other job is one dispatch.
TEST(FastpathThreadPool, DispatchesCountTheJobsThatWokeTheCrew) {
  ThreadPool one(1), four(4);
  const auto body = [](std::uint64_t, std::uint64_t) {};
  one.parallel_for(1000, body);
  four.parallel_for(100, body, 128);
  EXPECT_EQ(one.dispatches(), 0u);
  EXPECT_EQ(four.dispatches(), 0u);
  four.parallel_for(1000, body);
  four.parallel_phases(1000, [](std::uint64_t, std::uint64_t, const ThreadPool::Barrier& b) { b.wait(); });
  EXPECT_EQ(four.dispatches(), 2u);
}

// Waits up to `seconds` for the child; kills it and reports -1 if it is still running then.
int wait_for(pid_t child, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}

// Not in the TSan leg: its runtime does not support threads started after a multithreaded fork.
TEST(FastpathThreadPoolFork, AForkedChildRunsJobsAndTheParentStillDoes) {
  ThreadPool pool(4);
  ASSERT_TRUE(covers_exactly(pool, 12345));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const bool ok = covers_exactly(pool, 999) && covers_exactly(pool, 100000);
    ::_exit(ok ? 0 : 1);
  }
  EXPECT_EQ(wait_for(child, 20), 0) << "-1: the child's job never returned";
  EXPECT_TRUE(covers_exactly(pool, 777));
}

}  // namespace
}  // namespace cgad::fastpath
