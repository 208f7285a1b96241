// `cgad replay`: run a recorded stream of pseudo-gradients through one outer optimizer and write the
// parameters and state after every event. The reference backend computes in MPFR at the working precision.
#include "cli_support.hpp"
#include "commands.hpp"
#include "optimizer_options.hpp"
#include "replay_reference.hpp"

#include <fstream>
#include <iostream>
#include <memory>

namespace cgad::cli {
namespace {

struct ReplayOptions {
  std::string backend = "reference";
  std::string input;
  std::string output;
  unsigned precision = 0;
  OptimizerOptions optimizer;
};

void run_replay(const ReplayOptions& options) {
  const unsigned bits = apply_precision(options.precision);
  std::ifstream in(options.input);
  if (!in) throw reference::InputError("cannot open input file '" + options.input + "'");
  const PseudoGradientStream stream = read_stream(in, options.input);
  // Everything is computed before anything is written, and the file is replaced atomically: an error on
  // event 900 leaves no 899-line file that looks like a result, and never clobbers an earlier output.
  const ReplayResult result = replay_reference(stream, options.input, options.optimizer, std::cerr);
  const auto write_lines = [&](std::ostream& out) {
    for (const auto& record : result.records) out << record.dump() << "\n";
  };
  if (options.output == "-") {
    write_lines(std::cout);
  } else {
    write_atomically(options.output, write_lines);
  }
  std::cerr << "cgad replay: " << options.optimizer.optimizer << " (reference, " << bits << "-bit MPFR): "
            << result.records.size() << " events, " << result.nonfinite << " skipped for non-finite gradients, "
            << result.zero_gate << " skipped at a zero gate -> " << options.output << "\n";
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* command = app.add_subcommand("replay", "Replay a JSON-lines pseudo-gradient stream through an optimizer");
  command->add_option("--backend", options->backend, "reference (MPFR)")
      ->check(CLI::IsMember({"reference"}))
      ->capture_default_str();
  command->add_option("--input", options->input, "JSON-lines stream: {\"params\":[...]} then {\"grad\":[...],\"tau\":k}")
      ->required();
  command->add_option("--output", options->output, "JSON-lines result, one line per event ('-' for stdout)")->required();
  add_optimizer_options(*command, options->optimizer);
  add_precision_option(*command, options->precision);
  command->callback([options] { run_replay(*options); });
}

}  // namespace cgad::cli
