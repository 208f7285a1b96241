#pragma once
// The `report/` folder `cgad report` writes: report.md plus the CSV/JSON and PNG files behind every table
// and figure. Each file is written atomically, so an interrupted report never leaves a half-written file
// where a complete one was.
#include <filesystem>
#include <sstream>
#include <string>

namespace cgad::cli {

class ReportWriter {
 public:
  explicit ReportWriter(std::filesystem::path dir);
  const std::filesystem::path& dir() const { return dir_; }
  // Markdown appended to report.md, in order.
  std::ostringstream& markdown() { return markdown_; }
  // Writes `name` inside the report folder.
  void write_file(const std::string& name, const std::string& contents) const;
  // Writes report.md; returns its path.
  std::filesystem::path finish() const;

 private:
  std::filesystem::path dir_;
  std::ostringstream markdown_;
};

// The sections, in the order they appear. Each writes its own data files and figures and returns one line of
// its headline numbers, which `cgad report` prints as its summary.
std::string report_gate_section(ReportWriter& report);
std::string report_replay_section(ReportWriter& report);
std::string report_bound_section(ReportWriter& report);
std::string report_bias_sweep_section(ReportWriter& report);
std::string report_noise_section(ReportWriter& report);
std::string report_simulate_section(ReportWriter& report);
std::string report_bench_section(ReportWriter& report);

}  // namespace cgad::cli
