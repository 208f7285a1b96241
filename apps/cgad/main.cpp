// cgad: the command line of the Cosine-Gated Adam-Decay toolkit. Bad input of any kind ends in one line on
// stderr and exit status 2 (DESIGN.md §7).
#include "commands.hpp"

#include "cgad/reference/errors.hpp"

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "cgad: " << e.what() << " (see cgad --help)\n";
    return 2;
  } catch (const cgad::reference::InputError& e) {
    std::cerr << "cgad: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cgad: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
