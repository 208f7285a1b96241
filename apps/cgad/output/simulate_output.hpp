#pragma once
// What `cgad simulate`, `cgad merge` and the report's simulation section show of a sweep: the per-cell table
// (final loss mean ± σ over the seeds that did not diverge, single-shot risk mean + σ, diverged runs), the
// same as CSV or JSON, and PNG figures. One implementation, so a merged sweep prints exactly what the unsharded
// run would have.
#include "cgad/simulate/sweep_json.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace cgad::cli {

// One sentence on what every run of the grid shares (objective, workers, rounds, inner optimizer, delays,
// parameter format, divergence threshold).
std::string describe_sweep(const simulate::SweepGrid& grid);
// The grid's axes as `cgad simulate` flags (--optimizer … --tau … --size … --state … --seed …): with the
// defaults that describe_sweep states, the command that reruns it.
std::string sweep_axes_command(const simulate::SweepGrid& grid);

void print_sweep_table(std::ostream& out, const simulate::MergedSweep& sweep);
void print_sweep_csv(std::ostream& out, const simulate::MergedSweep& sweep);
std::string sweep_markdown_table(const simulate::MergedSweep& sweep);

// Figures, into `dir`, names starting with `prefix`: per state × size, the final loss mean and mean + σ (the
// single-shot risk) against τ, one pair of curves per method; with several sizes, per state × τ, the seed σ
// against size per method. Returns the file names written (cells without a finished seed have no point; a
// figure with no point at all is not drawn).
std::vector<std::string> plot_sweep(const simulate::MergedSweep& sweep, const std::filesystem::path& dir,
                                    const std::string& prefix = "");

// --json / --csv / --plot DIR, shared by simulate and merge.
struct SweepOutputOptions {
  bool json = false, csv = false;
  std::string plot_dir;
  std::vector<CLI::Option*> flags;  // as registered, so simulate can refuse them with --shard
};
void add_sweep_output_options(CLI::App& command, SweepOutputOptions& options);
// Refuses --json with --csv and an unusable --plot target, before any work is done.
void check_sweep_output(const SweepOutputOptions& options);
// The table (or JSON, or CSV) on stdout, then the figures.
void write_sweep_output(const simulate::MergedSweep& sweep, const SweepOutputOptions& options);

}  // namespace cgad::cli
