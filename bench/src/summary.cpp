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

nlohmann::ordered_json spread_json(const Spread& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

// One CGAD configuration's step against its in-place twin (the roofline), timed alternately; ratios per pair.
struct CpuMeasurement {
  Spread ratio, params_per_second;
  double step_bytes = 0, twin_bytes_per_second = 0;
  fastpath::CpuIsa isa = fastpath::CpuIsa::generic;
  unsigned threads = 0;
};

CpuMeasurement measure_cpu(const fastpath::StepConfig& config, std::size_t n, unsigned threads, double min_seconds) {
  FastpathCpuWorkload step(config, n, threads);
  InPlaceWorkload twin(config, n, step.threads());
  const PairedTimings t = measure_alternately(step, twin, min_seconds, 5);
  std::vector<double> ratios, rates, twin_rates;
  for (std::size_t i = 0; i < t.first.size(); ++i) {
    ratios.push_back(t.second[i] / t.first[i]);  // (bytes / step time) / (bytes / twin time)
    rates.push_back(step.parameters() / t.first[i]);
    twin_rates.push_back(twin.bytes() / t.second[i]);
  }
  return {spread(ratios), spread(rates), step.bytes(), spread(twin_rates).median, step.isa(), step.threads()};
}

fastpath::StepConfig cgad_config(fastpath::ParamFormat params, fastpath::StateFormat state) {
  fastpath::StepConfig config;  // CGAD, nearest rounding
  config.params = params;
  config.state = state;
  return config;
}

nlohmann::ordered_json run_cpu(std::size_t n, unsigned threads, double min_seconds, double& params_per_second) {
  // The production configuration first (the summary's headline), then the other formats the roofline goals name.
  const CpuMeasurement q8 =
      measure_cpu(cgad_config(fastpath::ParamFormat::bf16, fastpath::StateFormat::q8), n, threads, min_seconds);
  CopyWorkload copy(static_cast<std::size_t>(q8.step_bytes), q8.threads);
  const double copy_bytes_per_second = copy.bytes() / measure(copy, min_seconds);
  params_per_second = q8.params_per_second.median;
  const double step_bytes_per_second = q8.step_bytes * params_per_second / static_cast<double>(n);
  nlohmann::ordered_json out = {{"config", "cgad, bf16 params, q8 state, nearest"},
                                {"isa", fastpath::to_string(q8.isa)},
                                {"threads", q8.threads},
                                {"size", n},
                                {"params_per_second", params_per_second},
                                {"roofline_ratio", spread_json(q8.ratio)},
                                {"roofline_bytes_per_second", q8.twin_bytes_per_second},
                                {"step_bytes_per_second", step_bytes_per_second},
                                {"copy_bytes_per_second", copy_bytes_per_second},
                                {"copy_ratio", step_bytes_per_second / copy_bytes_per_second}};
  nlohmann::ordered_json formats = nlohmann::ordered_json::array();
  for (const auto& [params, state] : {std::pair{fastpath::ParamFormat::bf16, fastpath::StateFormat::fp32},
                                      std::pair{fastpath::ParamFormat::fp32, fastpath::StateFormat::fp32},
                                      std::pair{fastpath::ParamFormat::bf16, fastpath::StateFormat::bf16}}) {
    const CpuMeasurement m = measure_cpu(cgad_config(params, state), n, threads, min_seconds);
    formats.push_back({{"params", fastpath::to_string(params)},
                       {"state", fastpath::to_string(state)},
                       {"params_per_second", m.params_per_second.median},
                       {"roofline_ratio", spread_json(m.ratio)}});
  }
  out["other_formats"] = formats;
  return out;
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
  std::cerr << "cgad bench: CPU step vs its in-place twin (" << cpu_size << " parameters, " << threads
            << " threads) ...\n";
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
  const auto ratio = [](const nlohmann::ordered_json& r) {
    std::ostringstream s;
    s << std::setprecision(3) << r["median"].get<double>() << " (" << r["min"].get<double>() << "-"
      << r["max"].get<double>() << ")";
    return s.str();
  };
  text << std::setprecision(3) << "CPU   " << cpu["config"].get<std::string>() << ", " << cpu["size"] << " params, "
       << cpu["threads"] << " threads, " << cpu["isa"].get<std::string>() << ": " << ratio(cpu["roofline_ratio"])
       << " of its in-place roofline, " << cpu["copy_ratio"].get<double>() << " of memcpy ("
       << cpu["params_per_second"].get<double>() / 1e6 << " M params/s)\n";
  for (const auto& f : cpu["other_formats"]) {
    text << "      " << f["params"].get<std::string>() << " params, " << f["state"].get<std::string>()
         << " state: " << ratio(f["roofline_ratio"]) << " of its roofline ("
         << f["params_per_second"].get<double>() / 1e6 << " M params/s)\n";
  }
  text << "REF   256-bit MPFR: " << ref["updates_per_second"].get<double>() / 1e6 << " M updates/s, "
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
