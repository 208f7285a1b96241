// Report section: the quick summary benchmark (`cgad bench --quick`), every figure a ratio to a baseline timed in
// the same run, with the machine it ran on.
#include "report_writer.hpp"

#include "cgad/bench/summary.hpp"

#include <iomanip>
#include <sstream>
#include <string>
#include <thread>

namespace cgad::cli {

std::string report_bench_section(ReportWriter& report) {
  const nlohmann::ordered_json summary = bench::run_summary({.quick = true, .threads = 0});
  report.write_file("bench.json", summary.dump(2) + "\n");
  const auto& cpu = summary["cpu"];
  const auto& ref = summary["reference"];
  const auto& cuda = summary["cuda"];
  auto& md = report.markdown();
  md << std::setprecision(3) << "## 7. Performance, quick summary\n\n"
     << "`cgad bench --quick` on this machine (" << std::thread::hardware_concurrency() << " hardware threads), "
     << "short samples: indicative only — `bench/` has the Google Benchmark programs and the README the careful "
     << "figures. Each number is a ratio to a baseline timed in the same run.\n\n"
     << "| what | ratio | baseline |\n|---|---:|---|\n"
     << "| CPU step (" << cpu["config"].get<std::string>() << ", " << cpu["size"].get<std::size_t>() << " parameters, "
     << cpu["threads"].get<unsigned>() << " threads, " << cpu["isa"].get<std::string>() << "): bytes/s, median of 5 | "
     << cpu["roofline_ratio"]["median"].get<double>()
     << " | an in-place pass over the step's own bytes, timed alternately with it |\n"
     << "| the same step: bytes/s | " << cpu["copy_ratio"].get<double>()
     << " | a memcpy of the same number of bytes |\n"
     << "| reference step, 256-bit MPFR: time | " << ref["ratio_to_raw_mpfr"].get<double>()
     << " | the same arithmetic as raw `mpfr_*` calls |\n"
     << "| reference step: time per parameter | " << ref["slowdown_vs_fastpath"].get<double>()
     << " | the CPU fast path's |\n";
  if (cuda.contains("unavailable")) {
    md << "\nCUDA: not measured — " << cuda["unavailable"].get<std::string>() << ".\n\n";
  } else {
    md << "| CUDA step (" << cuda["size"].get<std::size_t>() << " parameters): bytes/s | "
       << cuda["effective_bandwidth_ratio"].get<double>() << " | a device-to-device copy |\n\n";
  }
  md << "Raw figures: `bench.json`.\n\n";
  std::ostringstream line;
  line << std::setprecision(3) << "bench (quick): CPU step " << cpu["roofline_ratio"]["median"].get<double>()
       << " of its in-place roofline (" << cpu["isa"].get<std::string>() << "), reference "
       << ref["ratio_to_raw_mpfr"].get<double>() << "x the raw-MPFR loop's time, CUDA "
       << (cuda.contains("unavailable")
               ? std::string("not measured")
               : std::to_string(cuda["effective_bandwidth_ratio"].get<double>()) + " of D2D copy");
  return line.str();
}

}  // namespace cgad::cli
