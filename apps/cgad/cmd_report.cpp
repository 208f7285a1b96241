// `cgad report`: the main job. Writes report/report.md with every section cgad can produce on its
// built-in defaults, the CSV behind each table and the PNG figures, and prints where it went.
#include "cli_support.hpp"
#include "commands.hpp"
#include "report_writer.hpp"
#include "signal_cleanup.hpp"

#include <chrono>
#include <iostream>
#include <iomanip>
#include <memory>
#include <string>
#include <vector>

namespace cgad::cli {
namespace {

struct ReportOptions {
  std::string out = "report";
  unsigned precision = 0;
};

void run_report(const ReportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const unsigned bits = apply_precision(options.precision);
  ReportWriter report(options.out);
  // Ctrl-C, kill or a closed terminal: the half-built folder goes with the process (the old report stays);
  // before this, it stayed until a later report removed it. Before any section starts a thread.
  const SignalCleanup on_signal([&report] { report.abandon(); });
  report.markdown() << "# cgad report\n\nCosine-Gated Adam-Decay: what cgad computes on its built-in defaults. "
                    << "Reference arithmetic: " << bits << "-bit MPFR. Regenerate with `cgad report`.\n\n";
  struct Section {
    const char* title;
    std::string (*run)(ReportWriter&);
  };
  std::vector<std::string> summary;
  for (const Section& section : {Section{"staleness gate", report_gate_section},
                                 Section{"reference replay of the built-in stream", report_replay_section},
                                 Section{"certified bound constants", report_bound_section},
                                 Section{"staleness-bias sweep", report_bias_sweep_section},
                                 Section{"rounding noise, fast path vs reference", report_noise_section},
                                 Section{"simulation sweep, outer optimizers under staleness", report_simulate_section},
                                 Section{"quick benchmark", report_bench_section}}) {
    std::cerr << "cgad report: " << section.title << " ...\n";
    summary.push_back(section.run(report));
  }
  const auto md = report.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "cgad report: wrote " << md.string() << " with the CSV and PNG files behind it, in " << std::fixed
            << std::setprecision(1) << seconds << " s\n";
  for (const std::string& line : summary) std::cout << "  " << line << "\n";
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* command = app.add_subcommand("report", "The main job: write report/report.md with tables and figures");
  command->add_option("--out", options->out, "folder to write the report into")->capture_default_str();
  add_precision_option(*command, options->precision);
  command->callback([options] { run_report(*options); });
}

}  // namespace cgad::cli
