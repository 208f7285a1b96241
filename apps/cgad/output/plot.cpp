#include "plot.hpp"

#include "cgad/io/atomic_file.hpp"
#include "cgad/core/errors.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>

extern char** environ;

namespace cgad::cli {

namespace {

// A gnuplot string literal: inside single quotes gnuplot reads '' as one quote. A control character (a newline
// above all) would end the command and start another, so each becomes a space: no text can become a command.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\'') {
      out += "''";
    } else {
      out += (u < 0x20 || u == 0x7F) ? ' ' : c;
    }
  }
  return out + "'";
}

// A title of several lines: each line a literal, joined by gnuplot's "\n" (its string concatenation, `.`), so a
// line break is the only control character that survives, and only as a line break.
std::string lines(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    out += quoted(text.substr(start, end - start)) + ".\"\\n\".";
  }
  return out + quoted(text.substr(start));
}

// Style k's look: the Okabe-Ito colours (distinct for the colour-blind), and dash patterns and point types that
// stay apart in grey. The cycles' lengths, 7 and 6, are coprime, so no two of the first 42 styles look alike,
// and the first six differ in all three.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
// Filled circle, square, triangles up and down, diamond, pentagon, open square.
constexpr int kPointTypes[] = {7, 5, 9, 11, 13, 15, 4};
constexpr const char* kDashes[] = {"solid", "(12,6)", "(3,4)", "(12,4,3,4)", "(12,4,3,4,3,4)", "(24,6,6,6)"};

void panel_script(std::ostringstream& out, const PlotSpec& spec, std::size_t panel) {
  out << "set title " << lines(spec.title) << "\nset xlabel " << quoted(spec.xlabel) << "\nset ylabel "
      << quoted(spec.ylabel) << "\n";
  out << (spec.log_x ? "set logscale x 2\n" : "unset logscale x\n");
  out << (spec.log_y ? "set logscale y\n" : "unset logscale y\n");
  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& s = spec.series[i];
    out << "$data" << panel << '_' << i << " << EOD\n";
    for (std::size_t k = 0; k < s.x.size(); ++k) out << s.x[k] << ' ' << s.y[k] << '\n';
    out << "EOD\n";
  }
  out << "plot ";
  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& s = spec.series[i];
    const std::size_t style = s.style >= 0 ? static_cast<std::size_t>(s.style) : i;
    const bool points = s.points && !s.dashed;
    const char* color = kColors[style % std::size(kColors)];
    out << (i ? ", " : "") << "$data" << panel << '_' << i << " using 1:2 with " << (points ? "linespoints" : "lines");
    // A `dashed` companion (a mean + σ): its style's colour, thinner, in long even dashes, a pattern no main series
    // has, so it is never taken for another method's mean.
    if (s.dashed) {
      out << " linewidth 1.5 linecolor rgb '" << color << "' dashtype (24,12)";
    } else {
      out << " linewidth 2 linecolor rgb '" << color << "' dashtype " << kDashes[style % std::size(kDashes)];
    }
    // About a dozen markers per series: one per sample hides the dash pattern on a long run.
    if (points)
      out << " pointtype " << kPointTypes[style % std::size(kPointTypes)] << " pointinterval "
          << std::max<std::size_t>(1, s.x.size() / 12);
    out << " title " << quoted(s.title);
  }
  out << "\n";
}

// The whole gnuplot script: the data as inline datablocks and the PNG to standard output, so that neither a path
// nor a file name ever appears in it.
std::string script_of(const PlotFigure& figure) {
  std::ostringstream out;
  out.precision(17);
  const std::size_t panels = figure.panels.size(), columns = panels > 1 ? 2 : 1,
                    rows = (panels + columns - 1) / columns;
  out << "set terminal pngcairo size " << (panels > 1 ? 1400 : 1000) << ',' << (panels > 1 ? 80 + 520 * rows : 650)
      << " noenhanced\nset output\nset grid\n";
  if (panels > 1) {
    out << "set multiplot layout " << rows << ',' << columns << " title " << lines(figure.title) << " font ',13'\n";
  }
  // Below the plot, never over the data; long series names would squeeze the plot from the right. Left-aligned,
  // each name after its line sample.
  out << "set key outside below Left reverse\n";
  for (std::size_t p = 0; p < panels; ++p) panel_script(out, figure.panels[p], p);
  if (panels > 1) out << "unset multiplot\n";
  return out.str();
}

// Whether the file open at `fd` is a whole PNG: the signature, then chunks (a 4-byte big-endian length, a 4-byte
// type, the data, a 4-byte CRC; PNG specification, 2nd edition, §5.3) that end exactly at the file's end with
// IEND. gnuplot reports no write error in its exit status (on a full filesystem it exits 0 having written 0 or
// 4096 bytes), so an image cut short anywhere is caught here, before it may replace a figure that was whole.
bool is_whole_png(int fd) {
  static constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  unsigned char head[8];
  if (size < sizeof head || ::pread(fd, head, sizeof head, 0) != static_cast<ssize_t>(sizeof head) ||
      std::memcmp(head, kSignature, sizeof head) != 0) {
    return false;
  }
  for (std::uint64_t at = sizeof head; at + 12 <= size;) {
    if (::pread(fd, head, sizeof head, static_cast<off_t>(at)) != static_cast<ssize_t>(sizeof head)) return false;
    const std::uint64_t length = (std::uint64_t{head[0]} << 24) | (std::uint64_t{head[1]} << 16) |
                                 (std::uint64_t{head[2]} << 8) | std::uint64_t{head[3]};
    at += 12 + length;
    if (std::memcmp(head + 4, "IEND", 4) == 0) return at == size;
  }
  return false;
}

}  // namespace

void check_plot_target(const std::filesystem::path& target) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    throw core::InputError("--plot needs gnuplot on PATH (Debian package gnuplot-nox), which is missing");
  }
  // The rules of every output (atomic_file.hpp): a missing or regular file in an existing directory. Opening the
  // temporary and dropping it checks exactly that, and leaves nothing behind.
  io::AtomicFile probe(target);
}

void plot_png(const std::filesystem::path& target, const PlotSpec& spec) {
  plot_png(target, PlotFigure{{}, {spec}});
}

void plot_png(const std::filesystem::path& target, const PlotFigure& figure) {
  check_plot_target(target);
  // gnuplot reads the script on its standard input and writes the PNG on its standard output, which is the
  // atomic temporary of the target: no data, script or image file of our own, and no shell -- the child is
  // started with an argument vector, so no path or title can reach a command interpreter.
  io::AtomicFile image(target);
  int script_pipe[2];
  if (::pipe2(script_pipe, O_CLOEXEC) != 0)
    throw core::InputError("cannot start gnuplot: " + std::string(std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, script_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, image.fd(), STDOUT_FILENO);
  char program[] = "gnuplot";
  char* const arguments[] = {program, nullptr};
  // gnuplot starts with no signal blocked, whatever this thread blocks (signal_cleanup.hpp), so it stops as any
  // process does.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  pid_t child = 0;
  const int spawned = ::posix_spawnp(&child, program, &actions, &attributes, arguments, environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(script_pipe[0]);
  if (spawned != 0) {
    ::close(script_pipe[1]);
    throw core::InputError("cannot start gnuplot: " + std::string(std::strerror(spawned)));
  }
  // gnuplot may stop reading early (a script error): a write to the closed pipe must fail, not kill cgad.
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  const std::string script = script_of(figure);
  const bool sent = io::write_all(script_pipe[1], script.data(), script.size());
  ::close(script_pipe[1]);
  ::sigaction(SIGPIPE, &previous, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {}
  if (!sent || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw core::InputError("gnuplot failed to draw " + target.string());
  }
  if (!is_whole_png(image.fd())) {
    struct stat st {};
    const long long bytes = ::fstat(image.fd(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
    throw core::InputError("gnuplot could not write " + target.string() + " whole (" + std::to_string(bytes) +
                           " bytes, not a complete PNG: is its filesystem full?); the file there is kept");
  }
  image.commit();
}

}  // namespace cgad::cli
