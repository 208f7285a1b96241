// `cgad replay`: run a recorded stream of pseudo-gradients through one outer optimizer and write the
// parameters and state after every event. The reference backend computes in MPFR at the working precision.
#include "cli_support.hpp"
#include "commands.hpp"
#include "optimizer_options.hpp"
#include "replay_fastpath.hpp"
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
  FastpathOptions fastpath;
  std::vector<CLI::Option*> fastpath_flags;
};

void run_replay(const ReplayOptions& options) {
  if (options.backend == "reference") {
    for (const CLI::Option* flag : options.fastpath_flags) {
      if (flag->count() > 0) throw reference::InputError(flag->get_name() + " applies to --backend fastpath only");
    }
  }
  const unsigned bits = apply_precision(options.precision);  // also the precision of the decimal parse
  std::ifstream in(options.input);
  if (!in) throw reference::InputError("cannot open input file '" + options.input + "'");
  const PseudoGradientStream stream = read_stream(in, options.input);
  // Everything is computed before anything is written, and the file is replaced atomically: an error on
  // event 900 leaves no 899-line file that looks like a result, and never clobbers an earlier output.
  const bool reference_backend = options.backend == "reference";
  const ReplayResult result =
      reference_backend ? replay_reference(stream, options.input, options.optimizer, std::cerr)
                        : replay_fastpath(stream, options.input, options.optimizer, options.fastpath, std::cerr);
  const auto write_lines = [&](std::ostream& out) {
    for (const auto& record : result.records) out << record.dump() << "\n";
  };
  if (options.output == "-") {
    write_lines(std::cout);
  } else {
    write_atomically(options.output, write_lines);
  }
  const std::string how = reference_backend ? "reference, " + std::to_string(bits) + "-bit MPFR"
                                            : "fastpath on " + options.fastpath.device + ", " + options.fastpath.params +
                                                  " params, " + options.fastpath.state + " state (" +
                                                  options.fastpath.q8_semantics + " semantics), " +
                                                  options.fastpath.rounding + " rounding";
  std::cerr << "cgad replay: " << options.optimizer.optimizer << " (" << how << "): "
            << result.records.size() << " events, " << result.nonfinite << " skipped for non-finite gradients, "
            << result.zero_gate << " skipped at a zero gate, " << result.overflowing
            << " skipped for overflowing gradients -> " << options.output << "\n";
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* command = app.add_subcommand("replay", "Replay a JSON-lines pseudo-gradient stream through an optimizer");
  command->add_option("--backend", options->backend, "reference (MPFR) or fastpath (production precision)")
      ->check(CLI::IsMember({"reference", "fastpath"}))
      ->capture_default_str();
  command->add_option("--input", options->input,
                      "JSON-lines stream: {\"params\":[...],\"tensors\":[n0,...]} then {\"grad\":[...],\"tau\":k}")
      ->required();
  command->add_option("--output", options->output, "JSON-lines result, one line per event ('-' for stdout)")->required();
  add_optimizer_options(*command, options->optimizer);
  options->fastpath_flags = add_fastpath_options(*command, options->fastpath);
  add_precision_option(*command, options->precision);
  command->callback([options] { run_replay(*options); });
}

}  // namespace cgad::cli
