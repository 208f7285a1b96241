// The fused CUDA step against a device-to-device copy of the same bytes, both timed with CUDA events
// (UseManualTime) after an L2 flush. Counters as in fastpath_cpu_bench: params_per_second, bytes_per_second
// (decimal), ratio_to_copy (the copy timed in the same iteration). Without a device every benchmark is
// skipped with the reason.
#include "cgad/bench/cuda_workload.hpp"
#include "cgad/reference/optimizers.hpp"

#include <benchmark/benchmark.h>

#include <string>

namespace {

namespace fp = cgad::fastpath;
namespace ref = cgad::reference;
namespace core = cgad::core;

void Step(benchmark::State& state, core::OptimizerKind optimizer, fp::ParamFormat params, fp::StateFormat moments) {
  const std::string why = cgad::bench::cuda_unavailable_reason();
  if (!why.empty()) {
    state.SkipWithError(("skipped: " + why).c_str());
    return;
  }
  fp::StepConfig config;
  config.optimizer = optimizer;
  config.params = params;
  config.state = moments;
  cgad::bench::CudaWorkload work(config, static_cast<std::size_t>(state.range(0)));
  double step_seconds = 0, copy_seconds = 0;
  for (auto _ : state) {
    const double seconds = work.time_step();
    state.SetIterationTime(seconds);
    step_seconds += seconds;
    copy_seconds += work.time_copy();
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["params_per_second"] = benchmark::Counter(work.parameters() * iterations / step_seconds,
                                                           benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  state.counters["bytes_per_second"] = benchmark::Counter(work.bytes() * iterations / step_seconds,
                                                          benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  state.counters["ratio_to_copy"] = copy_seconds / step_seconds;
}

const struct Registrar {
  Registrar() {
    for (auto optimizer : {core::OptimizerKind::cgad, core::OptimizerKind::nesterov}) {
      for (auto params : {fp::ParamFormat::fp32, fp::ParamFormat::bf16}) {
        for (auto moments : {fp::StateFormat::fp32, fp::StateFormat::bf16, fp::StateFormat::q8}) {
          const std::string name = "CudaStep/" + std::string(core::to_string(optimizer)) + "/" +
                                   std::string(fp::to_string(params)) + "/" + std::string(fp::to_string(moments));
          benchmark::RegisterBenchmark(name.c_str(), Step, optimizer, params, moments)
              ->RangeMultiplier(4)
              ->Range(1 << 16, 1 << 30)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
} registrar;

}  // namespace

BENCHMARK_MAIN();
