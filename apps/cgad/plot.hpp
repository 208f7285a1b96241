#pragma once
// PNG figures for every command and the report, through gnuplot (Debian gnuplot-nox): the data go to a temporary
// file, gnuplot draws into a temporary PNG beside the target, which is then renamed over it, so a failed
// plot never leaves a half-written figure. Without gnuplot on PATH the plot is refused (InputError, exit 2).
#include <filesystem>
#include <string>
#include <vector>

namespace cgad::cli {

struct PlotSeries {
  std::string title;
  std::vector<double> x, y;
  bool points = true;  // linespoints; false: lines
  int color = -1;       // series given the same number share a colour (e.g. a mean and its mean + σ); -1: by position
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
