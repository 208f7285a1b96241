// Running a sweep's runs: each on one thread, many at once, records in a fixed order.
#include "cgad/simulate/sweep.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include <sched.h>

namespace cgad::simulate {
namespace {

// The CPUs this process may run on. hardware_concurrency counts the machine's, which under Slurm or taskset
// can be many more than the job was given.
unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

RunRecord execute_run(const SweepGrid& grid, std::size_t index,
                      const std::function<void(std::int64_t, std::int64_t)>& progress, ArrivalRecorder* recorder) {
  RunRecord record;
  record.index = index;
  record.key = run_key(grid, index);
  try {
    // run_simulation validates the spec before it runs anything, so its refusal is the engine's.
    record.result = run_simulation(run_spec(grid, record.key), progress, recorder);
  } catch (const core::InputError& e) {
    record.status = RunStatus::unsupported;
    record.unsupported_reason = e.what();
    return record;
  }
  record.status = record.result.diverged           ? RunStatus::diverged
                  : !record.result.stalled.empty() ? RunStatus::stalled
                                                   : RunStatus::finished;
  return record;
}

std::vector<RunRecord> run_sweep(const SweepGrid& grid, std::span<const std::size_t> indices, unsigned jobs,
                                 const std::function<void(long, long)>& progress) {
  std::vector<RunRecord> records(indices.size());
  if (indices.empty()) return records;
  const unsigned cpus = usable_cpus();
  if (jobs == 0 || jobs > cpus) jobs = cpus;
  jobs = static_cast<unsigned>(std::min<std::size_t>(jobs, indices.size()));

  // Progress in outer rounds: every run counts its full length, and the rounds a run does not reach (it
  // diverged, or was refused) are counted when it returns, so the total is reached exactly at the end.
  const long rounds = static_cast<long>(grid.base.rounds);
  const long total = rounds * static_cast<long>(indices.size());
  long done = 0;
  std::mutex progress_mutex;
  const auto report = [&](long rounds_done) {
    if (!progress) return;
    const std::lock_guard lock(progress_mutex);
    done += rounds_done;
    progress(done, total);
  };

  // Each thread takes the next index not yet taken and writes its record into that index's slot, so the
  // result is in the order of `indices` whatever the threads' timing. An exception is kept, not lost: after
  // every thread has stopped, the one of the earliest run is rethrown.
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> failures(indices.size());
  const auto work = [&] {
    for (std::size_t slot; (slot = next.fetch_add(1)) < indices.size();) {
      long reported = 0;
      const auto run_progress = [&](std::int64_t run_done, std::int64_t) {
        report(static_cast<long>(run_done) - reported);
        reported = static_cast<long>(run_done);
      };
      try {
        records[slot] = execute_run(grid, indices[slot], run_progress);
      } catch (...) {
        failures[slot] = std::current_exception();
        next.store(indices.size());  // stop handing out work
      }
      report(rounds - reported);
    }
  };
  {
    // jthreads join when destroyed, so no exit from this block leaves a joinable thread behind (std::terminate).
    std::vector<std::jthread> threads;
    threads.reserve(jobs);
    for (unsigned t = 1; t < jobs; ++t) {
      try {
        threads.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // no more threads to be had (memory, process limits): the ones running and this one share the work
      }
    }
    work();
  }
  for (const auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
  return records;
}

}  // namespace cgad::simulate
