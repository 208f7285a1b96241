#include "plot.hpp"

#include "cli_support.hpp"

#include "cgad/reference/errors.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace cgad::cli {

namespace {

// A temporary file next to `beside` (same filesystem, so rename is atomic), removed on scope exit.
class TempFile {
 public:
  TempFile(const std::filesystem::path& dir, const std::string& stem) : path_(create_temporary_file(dir, stem)) {}
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A gnuplot string literal: inside single quotes gnuplot reads '' as one quote.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += (c == '\'') ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A POSIX shell word: inside single quotes nothing is special, and a quote is spelled '\''.
std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

namespace {
std::filesystem::path directory_of(const std::filesystem::path& target) {
  return target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
}
}  // namespace

void check_plot_target(const std::filesystem::path& target) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    throw reference::InputError("--plot needs gnuplot on PATH (Debian package gnuplot-nox), which is missing");
  }
  if (target.filename().empty()) throw reference::InputError("--plot needs a file name, got '" + target.string() + "'");
  std::error_code error;
  if (!std::filesystem::is_directory(directory_of(target), error)) {
    throw reference::InputError("--plot: no such directory: " + directory_of(target).string());
  }
}

void plot_png(const std::filesystem::path& target, const PlotSpec& spec) {
  check_plot_target(target);
  const std::filesystem::path dir = directory_of(target);
  const std::string stem = target.filename().string();
  TempFile data(dir, stem + ".dat"), script(dir, stem + ".gp"), image(dir, stem + ".png");
  {
    std::ofstream out(data.path());
    out.precision(17);
    for (const auto& s : spec.series) {
      for (std::size_t i = 0; i < s.x.size(); ++i) out << s.x[i] << ' ' << s.y[i] << '\n';
      out << "\n\n";  // gnuplot data-set separator: `index i` selects series i
    }
    if (!out) throw reference::InputError("cannot write the plot data beside " + target.string());
  }
  {
    std::ofstream out(script.path());
    out << "set terminal pngcairo size 1000,650 noenhanced\n"
        << "set output " << quoted(image.path().string()) << "\n"
        << "set title " << quoted(spec.title) << "\nset xlabel " << quoted(spec.xlabel) << "\nset ylabel "
        << quoted(spec.ylabel) << "\n"
        << "set key outside below\nset grid\n";  // below: long series names would squeeze the plot from the right
    if (spec.log_x) out << "set logscale x 2\n";
    if (spec.log_y) out << "set logscale y\n";
    out << "plot ";
    for (std::size_t i = 0; i < spec.series.size(); ++i) {
      out << (i ? ", " : "") << quoted(data.path().string()) << " index " << i << " using 1:2 with "
          << (spec.series[i].points ? "linespoints" : "lines");
      if (spec.series[i].color >= 0) out << " linecolor " << spec.series[i].color + 1;
      if (spec.series[i].dashed) out << " dashtype 2";
      out << " title " << quoted(spec.series[i].title);
    }
    out << "\n";
    if (!out) throw reference::InputError("cannot write the gnuplot script beside " + target.string());
  }
  const std::string command = "gnuplot " + shell_quoted(script.path().string()) + " 1>&2";
  if (std::system(command.c_str()) != 0) throw reference::InputError("gnuplot failed to draw " + target.string());
  std::filesystem::rename(image.path(), target);
}

}  // namespace cgad::cli
