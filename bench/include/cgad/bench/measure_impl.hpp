#pragma once
// measure(): the summary timer of `cgad bench` (Google Benchmark does the timing in bench/*_bench.cpp).
#include <algorithm>
#include <chrono>
#include <vector>

namespace cgad::bench {

// Seconds per run of `work` over enough runs to last `min_seconds`.
template <class Work>
double time_runs(Work& work, double min_seconds) {
  using clock = std::chrono::steady_clock;
  long runs = 0;
  const auto start = clock::now();
  double elapsed = 0;
  do {
    work.run();
    ++runs;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / static_cast<double>(runs);
}

template <class Work>
double measure(Work& work, double min_seconds, int samples) {
  work.run();  // warm caches, page in buffers, start the thread pool
  std::vector<double> per_run;
  for (int s = 0; s < samples; ++s) per_run.push_back(time_runs(work, min_seconds));
  std::nth_element(per_run.begin(), per_run.begin() + samples / 2, per_run.end());
  return per_run[static_cast<std::size_t>(samples / 2)];
}

template <class First, class Second>
PairedTimings measure_alternately(First& first, Second& second, double min_seconds, int samples) {
  first.run();
  second.run();
  PairedTimings out;
  for (int s = 0; s < samples; ++s) {
    out.first.push_back(time_runs(first, min_seconds));
    out.second.push_back(time_runs(second, min_seconds));
  }
  return out;
}

}  // namespace cgad::bench
