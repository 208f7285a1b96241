#pragma once
// PNG figures for every command and the report, through gnuplot (Debian gnuplot-nox): gnuplot is started without a
// shell, reads a script with the data inline on its standard input and draws the PNG to its standard output,
// which is the target's atomic temporary (io/atomic_file.hpp), renamed over the target once gnuplot
// succeeded and the image it wrote is a whole PNG (gnuplot's own write errors, a full filesystem above all, do
// not reach its exit status). No path, file name or title is ever part of a command, so none can inject one; a failed
// plot never leaves a half-written figure, and no temporary of ours is left by a crash. Without gnuplot on PATH the
// plot is refused (InputError, exit 2).
#include <filesystem>
#include <string>
#include <vector>

namespace cgad::cli {

struct PlotSeries {
  std::string title;
  std::vector<double> x, y;
  bool points = true;  // linespoints; false: lines
  int color = -1;      // series given the same number share a colour (e.g. a mean and its mean + σ); -1: by position
  bool dashed = false;
};

struct PlotSpec {
  std::string title, xlabel, ylabel;
  bool log_x = false, log_y = false;
  std::vector<PlotSeries> series;
};

// Refuses (InputError) a plot that cannot be drawn -- gnuplot missing, or no such directory -- so a long run
// fails before it starts rather than after.
void check_plot_target(const std::filesystem::path& target);

void plot_png(const std::filesystem::path& target, const PlotSpec& spec);

}  // namespace cgad::cli
