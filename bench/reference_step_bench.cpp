// The reference CGAD step in MPFR at 64, 128, 256 and 512 bits, against a loop of raw mpfr_* calls on reused
// temporaries doing the same arithmetic (bench::RawMpfrWorkload). Counter: updates_per_second (parameter
// updates). The ratio Reference/Raw at equal bits and size is the reference's overhead.
#include "cgad/bench/workloads.hpp"

#include <benchmark/benchmark.h>

namespace {

namespace ref = cgad::reference;

template <class Workload>
void Run(benchmark::State& state) {
  const unsigned requested = static_cast<unsigned>(state.range(0));
  const unsigned bits = ref::set_working_precision_bits(requested);
  const auto n = static_cast<std::size_t>(state.range(1));
  Workload work(n);
  for (auto _ : state) work.run();
  state.counters["updates_per_second"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::to_string(bits) + " effective bits");
}

void shapes(benchmark::internal::Benchmark* b) {
  for (long bits : {64, 128, 256, 512}) {
    for (long n : {1 << 10, 1 << 14}) b->Args({bits, n});
  }
  b->ArgNames({"bits", "n"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(Run, cgad::bench::ReferenceWorkload)->Name("Reference")->Apply(shapes);
BENCHMARK_TEMPLATE(Run, cgad::bench::RawMpfrWorkload)->Name("RawMpfr")->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
