// cgad: the command line of the Cosine-Gated Adam-Decay toolkit. Bad input of any kind ends in one line on
// stderr and exit status 2 (docs/design.md §7).
#include "cli_support.hpp"
#include "commands.hpp"

#include "cgad/core/errors.hpp"

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <exception>
#include <new>
#include <iostream>

int main(int argc, char** argv) {
  // A standard descriptor closed by the caller (cgad >&-) would be reused by the next file cgad opens, and output
  // meant for it would land in that file. Plug each closed one with a descriptor that refuses writes (a directory
  // opened read-only): a write then fails as it would on the closed one, and is reported.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      const int plug = ::open("/", O_RDONLY | O_DIRECTORY);
      if (plug >= 0 && plug != fd) {
        ::dup2(plug, fd);
        ::close(plug);
      }
    }
  }
  cgad::cli::install_out_of_memory_handling();
  cgad::cli::route_standard_output();
  CLI::App app{"cgad: Cosine-Gated Adam-Decay for asynchronous DiLoCo -- reference, fast path, theory, checks"};
  app.require_subcommand(1);
  cgad::cli::add_gate_command(app);
  cgad::cli::add_bound_command(app);
  cgad::cli::add_verify_bound_command(app);
  cgad::cli::add_replay_command(app);
  cgad::cli::add_report_command(app);
  cgad::cli::add_bench_command(app);
  cgad::cli::add_codebook_command(app);
  cgad::cli::add_noise_command(app);
  cgad::cli::add_simulate_command(app);
  cgad::cli::add_merge_command(app);
  cgad::cli::install_value_checks(app);
  try {
    cgad::cli::check_list_items(app, argc, argv);
    app.parse(argc, argv);
    // A result that could not be written is not a result: a write error on standard output (> /dev/full, a
    // closed descriptor) is refused like bad input, never exit status 0.
    cgad::cli::finish_standard_output();
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "cgad: " << e.what() << " (see cgad --help)\n";
    return 2;
  } catch (const cgad::core::InputError& e) {
    std::cerr << "cgad: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    cgad::cli::report_out_of_memory();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cgad: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
