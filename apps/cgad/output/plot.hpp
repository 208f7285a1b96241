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

// Every series is told apart by three things at once -- colour, dash pattern and point type -- so that a figure
// reads in grey, and no two styles of a figure look alike (gnuplot's default cycles its colours after eight).
struct PlotSeries {
  std::string title;  // in words: the legend is read by a person
  std::vector<double> x, y;
  bool points = true;   // linespoints; false: lines
  int style = -1;       // series given the same number share colour, dash and points (e.g. a mean and its mean + σ,
                        // or one optimizer across panels); -1: by position
  bool dashed = false;  // a companion of its style's main series (e.g. mean + σ): thinner, long even dashes, no points
};

struct PlotSpec {  // one panel
  std::string title, xlabel, ylabel;
  bool log_x = false, log_y = false;
  std::vector<PlotSeries> series;
};

// Several panels in one image (gnuplot's multiplot), two to a row, under a title: a study whose series differ in
// more than one way is split by all but one of them, so each panel's legend names a handful of series in words.
struct PlotFigure {
  std::string title;
  std::vector<PlotSpec> panels;
};

// Refuses (InputError) a plot that cannot be drawn -- gnuplot missing, or no such directory -- so a long run
// fails before it starts rather than after.
void check_plot_target(const std::filesystem::path& target);

void plot_png(const std::filesystem::path& target, const PlotFigure& figure);
void plot_png(const std::filesystem::path& target, const PlotSpec& spec);  // one panel

}  // namespace cgad::cli
