// The fast-path CPU step against its in-place roofline and a plain copy of the same bytes, measured in the same run.
//
// Counters (wall-clock rates; the step's time is taken by hand around each run, because the work runs on several
// threads and the roofline runs between the step's runs):
//   params_per_second, bytes_per_second — decimal, the step's real traffic (bench::step_bytes);
//   ratio_to_roofline — the step's bytes per second over its in-place twin's (bench::InPlaceWorkload: the same
//   buffers and bytes, no arithmetic), the two run alternately, one twin run after each step run;
//   ratio_to_copy — the same over a multi-threaded memcpy moving the same number of bytes with the same thread
//   count, timed by this process when the benchmark starts.
// The label says the thread count and the ISA the step ran (CGAD_CPU_ISA chooses another, cpu_isa.hpp).
// CGAD_BENCH_THREADS sets the thread count of all three (default: every core).
//
// Q8Encode/<isa>/<map> times the q8 block encoder alone (q8_vector.hpp) on one thread, a 256-element block in L1
// as the step hands it over: items_per_second is elements encoded per second (one moment), so 1e9 over it is ns
// per element per moment. Every ISA this CPU and build can run is registered, so one run compares them.
#include "cgad/bench/workloads.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/q8_vector.hpp"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>

namespace {

using cgad::bench::CopyWorkload;
using cgad::bench::FastpathCpuWorkload;
using cgad::bench::InPlaceWorkload;
namespace fp = cgad::fastpath;
namespace core = cgad::core;

unsigned bench_threads() {
  if (const char* text = std::getenv("CGAD_BENCH_THREADS"))
    return static_cast<unsigned>(std::strtoul(text, nullptr, 10));
  return std::thread::hardware_concurrency();
}

// Bytes per second of the copy baseline for a traffic volume, measured once per volume in this process.
double copy_bytes_per_second(double bytes) {
  static std::map<double, double> cache;
  auto [it, fresh] = cache.try_emplace(bytes, 0.0);
  if (fresh) {
    CopyWorkload copy(static_cast<std::size_t>(bytes), bench_threads());
    it->second = copy.bytes() / cgad::bench::measure(copy, 0.1);
  }
  return it->second;
}

benchmark::Counter rate(double per_iteration) {
  return benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// The baseline alone: a copy of the traffic of a bf16/q8 CGAD step over n parameters.
void Copy(benchmark::State& state) {
  fp::StepConfig config;
  config.state = fp::StateFormat::q8;
  CopyWorkload copy(static_cast<std::size_t>(cgad::bench::step_bytes(config, static_cast<std::size_t>(state.range(0)))),
                    bench_threads());
  for (auto _ : state) copy.run();
  state.counters["bytes_per_second"] = rate(copy.bytes());
}

void Step(benchmark::State& state, core::OptimizerKind optimizer, fp::ParamFormat params, fp::StateFormat moments) {
  fp::StepConfig config;
  config.optimizer = optimizer;
  config.params = params;
  config.state = moments;
  FastpathCpuWorkload step(config, static_cast<std::size_t>(state.range(0)), bench_threads());
  InPlaceWorkload twin(config, static_cast<std::size_t>(state.range(0)), step.threads());
  const double copy = copy_bytes_per_second(step.bytes());
  using clock = std::chrono::steady_clock;
  double step_seconds = 0, twin_seconds = 0;
  twin.run();
  for (auto _ : state) {
    const auto start = clock::now();
    step.run();
    const auto middle = clock::now();
    twin.run();
    const double seconds = std::chrono::duration<double>(middle - start).count();
    state.SetIterationTime(seconds);
    step_seconds += seconds;
    twin_seconds += std::chrono::duration<double>(clock::now() - middle).count();
  }
  state.counters["params_per_second"] = rate(step.parameters());
  state.counters["bytes_per_second"] = rate(step.bytes());
  state.counters["ratio_to_roofline"] = twin_seconds / step_seconds;
  state.counters["ratio_to_copy"] = step.bytes() * static_cast<double>(state.iterations()) / step_seconds / copy;
  state.SetLabel(std::to_string(step.threads()) + " threads, " + std::string(fp::to_string(step.isa())));
}

// A block of normalized moment values (value/absmax: normal values over the block's largest magnitude), of either
// sign for the signed map and squared for the unsigned one, as the step's first and second moments are.
void Q8Encode(benchmark::State& state, fp::CpuIsa isa, fp::Q8MapKind kind) {
  const fp::Q8Map& map = fp::dynamic_map(kind);
  std::mt19937 generator(42);
  std::normal_distribution<float> normal;
  float values[fp::kQ8BlockSize], absmax = 0;
  for (float& v : values) {
    v = normal(generator);
    if (kind != fp::Q8MapKind::signed_map) v *= v;
    absmax = std::fmax(absmax, std::fabs(v));
  }
  for (float& v : values) v /= absmax;
  std::uint8_t codes[fp::kQ8BlockSize];
  for (auto _ : state) {
    benchmark::DoNotOptimize(values);
    fp::q8_encode_nearest(values, fp::kQ8BlockSize, map, codes, isa);
    benchmark::DoNotOptimize(codes);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * fp::kQ8BlockSize));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->RangeMultiplier(8)->Range(1 << 10, 1 << 27)->Unit(benchmark::kMicrosecond);
}

BENCHMARK(Copy)->Apply(sizes)->UseRealTime();

const struct Registrar {
  Registrar() {
    for (auto isa : fp::supported_cpu_isas()) {
      for (auto kind : {fp::Q8MapKind::signed_map, fp::Q8MapKind::unsigned_map}) {
        const std::string name = "Q8Encode/" + std::string(fp::to_string(isa)) + "/" +
                                 (kind == fp::Q8MapKind::signed_map ? "signed" : "unsigned");
        benchmark::RegisterBenchmark(name.c_str(), Q8Encode, isa, kind);
      }
    }
    for (auto optimizer : {core::OptimizerKind::cgad, core::OptimizerKind::adam, core::OptimizerKind::nesterov}) {
      for (auto params : {fp::ParamFormat::fp32, fp::ParamFormat::bf16}) {
        for (auto moments : {fp::StateFormat::fp32, fp::StateFormat::bf16, fp::StateFormat::q8}) {
          const std::string name = "Step/" + std::string(core::to_string(optimizer)) + "/" +
                                   std::string(fp::to_string(params)) + "/" + std::string(fp::to_string(moments));
          benchmark::RegisterBenchmark(name.c_str(), Step, optimizer, params, moments)->Apply(sizes)->UseManualTime();
        }
      }
    }
  }
} registrar;

}  // namespace

BENCHMARK_MAIN();
