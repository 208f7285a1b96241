#include "cgad/bench/summary.hpp"

#include "cgad/bench/cuda_workload.hpp"
#include "cgad/bench/workloads.hpp"
#include "cgad/reference/real.hpp"

#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

namespace cgad::bench {
namespace {

nlohmann::ordered_json run_cpu(std::size_t n, unsigned threads, double min_seconds, double& params_per_second) {
  fastpath::StepConfig config;  // CGAD, bf16 params, q8 state: the production configuration
  config.params = fastpath::ParamFormat::bf16;
  config.state = fastpath::StateFormat::q8;
  FastpathCpuWorkload step(config, n, threads);
  CopyWorkload copy(static_cast<std::size_t>(step.bytes()), step.threads());
  const double copy_seconds = measure(copy, min_seconds);
  const double step_seconds = measure(step, min_seconds);
  params_per_second = step.parameters() / step_seconds;
  return {{"config", "cgad, bf16 params, q8 state, nearest"},
          {"effective_bandwidth_ratio", (step.bytes() / step_seconds) / (copy.bytes() / copy_seconds)},
          {"params_per_second", params_per_second},
          {"step_bytes_per_second", step.bytes() / step_seconds},
          {"copy_bytes_per_second", copy.bytes() / copy_seconds},
          {"threads", step.threads()},
          {"size", n}};
}

nlohmann::ordered_json run_reference(std::size_t n, double min_seconds, double fastpath_params_per_second) {
  const reference::PrecisionScope precision(256);
  ReferenceWorkload ours(n);
  RawMpfrWorkload raw(n);
  const double ours_seconds = measure(ours, min_seconds);
  const double raw_seconds = measure(raw, min_seconds);
  const double updates = static_cast<double>(n) / ours_seconds;
  return {{"updates_per_second", updates},
          {"bits", 256},
          {"effective_bits", precision.bits()},
          {"ratio_to_raw_mpfr", ours_seconds / raw_seconds},
          {"slowdown_vs_fastpath", fastpath_params_per_second / updates},
          {"size", n}};
}

nlohmann::ordered_json run_cuda(std::size_t n, int repetitions) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) return {{"unavailable", why}};
  fastpath::StepConfig config;
  config.params = fastpath::ParamFormat::bf16;
  config.state = fastpath::StateFormat::q8;
  CudaWorkload work(config, n);
  work.time_step();  // first launch: module load, allocation of nothing else
  double step = 0, copy = 0;
  for (int i = 0; i < repetitions; ++i) {
    step += work.time_step();
    copy += work.time_copy();
  }
  return {{"effective_bandwidth_ratio", copy / step},
          {"params_per_second", work.parameters() * repetitions / step},
          {"step_bytes_per_second", work.bytes() * repetitions / step},
          {"size", n}};
}

}  // namespace

nlohmann::ordered_json run_summary(const SummaryOptions& options) {
  // 2^24 parameters: the smallest size the bandwidth goal is stated for, and past every cache here (the copy
  // of 2^22 parameters' traffic still runs partly from L3 and reads 3x faster). quick only shortens samples.
  const std::size_t cpu_size = 1u << 24;
  const double min_seconds = options.quick ? 0.05 : 0.5;
  const unsigned threads = options.threads ? options.threads : std::thread::hardware_concurrency();
  double fastpath_rate = 0;
  nlohmann::ordered_json out;
  std::cerr << "cgad bench: CPU step vs copy (" << cpu_size << " parameters, " << threads << " threads) ...\n";
  out["cpu"] = run_cpu(cpu_size, threads, min_seconds, fastpath_rate);
  std::cerr << "cgad bench: reference vs raw MPFR (256 bits) ...\n";
  out["reference"] = run_reference(options.quick ? 1024 : 8192, min_seconds, fastpath_rate);
  std::cerr << "cgad bench: CUDA ...\n";
  out["cuda"] = run_cuda(options.quick ? (1u << 24) : (1u << 28), options.quick ? 5 : 20);
  return out;
}

std::string summary_text(const nlohmann::ordered_json& out) {
  std::ostringstream text;
  const auto& cpu = out["cpu"];
  const auto& ref = out["reference"];
  text << std::setprecision(3) << "CPU   " << cpu["config"].get<std::string>() << ", " << cpu["size"] << " params, "
       << cpu["threads"] << " threads: " << cpu["effective_bandwidth_ratio"].get<double>()
       << " of copy bandwidth (" << cpu["params_per_second"].get<double>() / 1e6 << " M params/s)\n"
       << "REF   256-bit MPFR: " << ref["updates_per_second"].get<double>() / 1e6 << " M updates/s, "
       << ref["ratio_to_raw_mpfr"].get<double>() << "x the raw-MPFR loop's time, "
       << ref["slowdown_vs_fastpath"].get<double>() << "x slower than the fast path\n";
  if (out["cuda"].contains("unavailable")) {
    text << "CUDA  unavailable: " << out["cuda"]["unavailable"].get<std::string>() << "\n";
  } else {
    text << "CUDA  " << out["cuda"]["size"] << " params: " << out["cuda"]["effective_bandwidth_ratio"].get<double>()
         << " of device-to-device copy bandwidth\n";
  }
  return text.str();
}

}  // namespace cgad::bench
