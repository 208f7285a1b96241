#pragma once
// The `report/` folder `cgad report` writes: report.md plus the CSV/JSON and PNG files behind every table
// and figure. The whole folder is built in a fresh temporary folder beside the target (named as atomic_file.hpp
// names temporaries, with a `.cgad-building` marker inside) and swapped in whole by finish(): atomically
// (renameat2 RENAME_EXCHANGE) where the target exists, by one rename where it does not. So a report killed half-way
// leaves the previous report exactly as it was -- never a new gate.csv beside an old report.md -- and the next
// run removes the half-built folder (a stale temporary of a dead process, still marked as building). Files of the
// old folder that the new report does not write (the user's own notes) are moved into the new one, never lost;
// the ones it replaces go. The target may not be a file, the current directory or a folder above it.
#include <filesystem>
#include <sstream>
#include <string>

namespace cgad::cli {

class ReportWriter {
 public:
  explicit ReportWriter(std::filesystem::path target);
  // Without finish() (an exception), the temporary folder is removed and the target is untouched.
  ~ReportWriter();
  ReportWriter(const ReportWriter&) = delete;
  ReportWriter& operator=(const ReportWriter&) = delete;
  // Where the sections write: the temporary folder until finish().
  const std::filesystem::path& dir() const { return build_; }
  // Markdown appended to report.md, in order.
  std::ostringstream& markdown() { return markdown_; }
  // Writes `name` inside the report folder.
  void write_file(const std::string& name, const std::string& contents) const;
  // Writes report.md and swaps the folder in; returns the final path of report.md, as the user named the folder.
  std::filesystem::path finish();

 private:
  std::filesystem::path shown_;   // the target as the user named it
  std::filesystem::path target_;  // absolute
  std::filesystem::path build_;
  bool finished_ = false;
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
