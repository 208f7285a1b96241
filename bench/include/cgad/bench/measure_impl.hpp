#pragma once
// measure(): the summary timer of `cgad bench` (Google Benchmark does the timing in bench/*_bench.cpp).
#include <algorithm>
#include <chrono>
#include <vector>

namespace cgad::bench {

template <class Work>
double measure(Work& work, double min_seconds, int samples) {
  using clock = std::chrono::steady_clock;
  work.run();  // warm caches, page in buffers, start the thread pool
  std::vector<double> per_run;
  for (int s = 0; s < samples; ++s) {
    long runs = 0;
    const auto start = clock::now();
    double elapsed = 0;
    do {
      work.run();
      ++runs;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < min_seconds);
    per_run.push_back(elapsed / static_cast<double>(runs));
  }
  std::nth_element(per_run.begin(), per_run.begin() + samples / 2, per_run.end());
  return per_run[static_cast<std::size_t>(samples / 2)];
}

}  // namespace cgad::bench
