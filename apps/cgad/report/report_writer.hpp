#pragma once
// The `report/` folder `cgad report` writes: report.md plus the CSV/JSON and PNG files behind every table
// and figure, swapped in whole (io/atomic_folder.hpp) when the report is finished.
#include "cgad/io/atomic_folder.hpp"

#include <filesystem>
#include <sstream>
#include <string>

namespace cgad::cli {

class ReportWriter {
 public:
  explicit ReportWriter(std::filesystem::path target) : folder_(std::move(target), "report") {}
  // Where the sections write: the temporary folder until finish().
  const std::filesystem::path& dir() const { return folder_.dir(); }
  // Markdown appended to report.md, in order.
  std::ostringstream& markdown() { return markdown_; }
  // Writes `name` inside the report folder.
  void write_file(const std::string& name, const std::string& contents) const { folder_.write_file(name, contents); }
  // Writes report.md and swaps the folder in; returns the final path of report.md, as the user named the folder.
  // Removes the unfinished folder (from a signal's watcher thread, signal_cleanup.hpp); the old one stays.
  void abandon() noexcept { folder_.abandon(); }
  std::filesystem::path finish() {
    folder_.write_file("report.md", markdown_.str());
    folder_.commit();
    return folder_.target() / "report.md";
  }

 private:
  io::AtomicFolder folder_;
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
