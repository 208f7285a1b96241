// `cgad replay`: run a recorded stream of pseudo-gradients through one outer optimizer and write the
// parameters and state after every event. The reference backend computes in MPFR at the working precision.
#include "cli_support.hpp"
#include "commands.hpp"
#include "optimizer_flags.hpp"

#include "cgad/differential/replay_fastpath.hpp"
#include "cgad/io/input_file.hpp"
#include "cgad/differential/replay_reference.hpp"

#include <iostream>
#include <memory>

namespace cgad::cli {
namespace {

struct ReplayOptions {
  std::string backend = "reference";
  std::string input;
  std::string output;
  unsigned precision = 0;
  core::OptimizerOptions optimizer;
  fastpath::FastpathOptions fastpath;
  std::vector<CLI::Option*> fastpath_flags;
  std::vector<InputIdentity> inputs;  // the files read while the options were parsed (--q8-maps)
};

void run_replay(const ReplayOptions& options) {
  if (options.backend == "reference") {
    for (const CLI::Option* flag : options.fastpath_flags) {
      if (flag->count() > 0) throw core::InputError(flag->get_name() + " applies to --backend fastpath only");
    }
  }
  const unsigned bits = apply_precision(options.precision);  // also the precision of the decimal parse
  // The input under cli_support's rule (regular file, pipe or FIFO; never a wait without end); the output
  // checked before any work (a directory, a device node, "" are refused now, not after the last event).
  io::InputFile input(options.input);
  OutputFile output(options.output);
  // Writing any input would destroy it (the same path, a symlink or a hard link to it, or standard output).
  std::vector<InputIdentity> inputs = options.inputs;
  inputs.push_back({"the input file '" + options.input + "'", input.device(), input.inode()});
  refuse_output_onto_inputs(output, "--output '" + options.output + "'", inputs);
  differential::StreamReader reader(input.stream(), options.input);
  // Each record goes to the output's temporary as soon as it is computed (memory does not grow with the stream),
  // and the temporary replaces the output only when every event has run: an error on event 900 leaves no
  // 899-line file that looks like a result, and never clobbers an earlier output.
  const bool reference_backend = options.backend == "reference";
  const auto next = [&] { return reader.next(); };
  const auto sink = [&](const differential::EventRecord& record) {
    record.write(output.stream());
    output.stream() << "\n";
  };
  const differential::ReplayCounts result =
      reference_backend
          ? differential::replay_reference(reader.header(), next, options.input, options.optimizer, std::cerr, sink)
          : differential::replay_fastpath(reader.header(), next, options.input, options.optimizer, options.fastpath,
                                          std::cerr, sink);
  output.commit();
  const std::string how = reference_backend
                              ? "reference, " + std::to_string(bits) + "-bit MPFR"
                              : "fastpath on " + options.fastpath.device + ", " + options.fastpath.params +
                                    " params, " + options.fastpath.state + " state (" + options.fastpath.q8_semantics +
                                    " semantics), " + options.fastpath.rounding + " rounding";
  std::cerr << "cgad replay: " << options.optimizer.optimizer << " (" << how << "): " << result.events << " events, "
            << result.nonfinite << " skipped for non-finite gradients, " << result.zero_gate
            << " skipped at a zero gate, " << result.overflowing << " skipped for overflowing gradients -> "
            << options.output << "\n";
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* command = app.add_subcommand("replay", "Replay a JSON-lines pseudo-gradient stream through an optimizer");
  command->add_option("--backend", options->backend, "reference (MPFR) or fastpath (production precision)")
      ->check(CLI::IsMember({"reference", "fastpath"}))
      ->capture_default_str();
  command
      ->add_option("--input", options->input,
                   "JSON-lines stream: {\"params\":[...],\"tensors\":[n0,...]} then {\"grad\":[...],\"tau\":k}; a "
                   "regular file, or a pipe or FIFO read as a stream (/dev/stdin, <(...))")
      ->required();
  command
      ->add_option("--output", options->output,
                   "JSON-lines result, one line per event ('-' for stdout); replaces a regular file atomically "
                   "(through a symlink), never a device, FIFO, directory or an input (--input, --q8-maps)")
      ->required();
  add_optimizer_options(*command, options->optimizer);
  options->fastpath_flags = add_fastpath_options(*command, options->fastpath, options->inputs);
  add_precision_option(*command, options->precision);
  command->callback([options] { run_replay(*options); });
}

}  // namespace cgad::cli
