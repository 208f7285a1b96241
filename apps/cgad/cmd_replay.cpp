// `cgad replay`: run a recorded stream of pseudo-gradients through one outer optimizer and write the
// parameters and state after every event. The reference backend computes in MPFR at the working precision.
#include "cli_support.hpp"
#include "commands.hpp"
#include "optimizer_options.hpp"
#include "replay_stream.hpp"

#include "cgad/reference/optimizers.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace cgad::cli {
namespace {

struct ReplayOptions {
  std::string backend = "reference";
  std::string input;
  std::string output;
  unsigned precision = 0;
  OptimizerOptions optimizer;
};

template <reference::RealScalar Real>
nlohmann::ordered_json decimal_array(std::span<const Real> values) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Real& x : values) out.push_back(reference::to_decimal(x));
  return out;
}

template <reference::RealScalar Real>
std::vector<Real> parse_vector(const std::vector<std::string>& text, const std::string& what) {
  std::vector<Real> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out.push_back(reference::parse_real<Real>(text[i], what + "[" + std::to_string(i) + "]"));
  return out;
}

struct ReplayTally {
  std::size_t events = 0, nonfinite = 0, zero_gate = 0;
};

// Runs the stream through the reference optimizer; writes one JSON line per event to `out`.
ReplayTally replay_reference(const PseudoGradientStream& stream, const std::string& source,
                             const OptimizerOptions& options, std::ostream& out) {
  using reference::mpfr_real;
  const auto config = optimizer_config<mpfr_real>(options);
  std::vector<mpfr_real> params = parse_vector<mpfr_real>(stream.params, source + ":params");
  const auto optimizer = reference::make_optimizer(config, params.size());
  ReplayTally tally;
  for (std::size_t i = 0; i < stream.events.size(); ++i) {
    const StreamEvent& event = stream.events[i];
    const std::string where = source + ":" + std::to_string(event.line);
    const std::vector<mpfr_real> grad = parse_vector<mpfr_real>(event.grad, where + ": grad");
    reference::StepReport<mpfr_real> report;
    try {
      report = optimizer->apply(params, {grad, event.tau, event.fragment});
    } catch (const reference::InputError& e) {
      throw reference::InputError(where + ": " + e.what());
    }
    optimizer->advance_round();
    ++tally.events;
    nlohmann::ordered_json record{{"event", i},
                          {"tau", event.tau},
                          {"fragment", event.fragment},
                          {"tau_effective", report.tau_effective},
                          {"sigma", nullptr},
                          {"skipped", !report.applied}};
    if (report.reason != reference::SkipReason::nonfinite_gradient) record["sigma"] = reference::to_decimal(report.sigma);
    if (!report.applied) record["skip_reason"] = std::string(reference::to_string(report.reason));
    if (report.reason == reference::SkipReason::nonfinite_gradient) {
      ++tally.nonfinite;
      std::cerr << "cgad: " << where << ": event " << i << " skipped: non-finite pseudo-gradient at element "
                << report.nonfinite_index << "; nothing changed\n";
    }
    if (report.reason == reference::SkipReason::zero_gate) ++tally.zero_gate;
    record["params"] = decimal_array<mpfr_real>(params);
    nlohmann::ordered_json state = nlohmann::ordered_json::object();
    for (const auto& buffer : optimizer->buffers()) state[buffer.name] = decimal_array(buffer.values);
    for (const auto& counter : optimizer->counters()) state[counter.name] = counter.values;
    record["state"] = std::move(state);
    out << record.dump() << "\n";
  }
  return tally;
}

void run_replay(const ReplayOptions& options) {
  const unsigned bits = apply_precision(options.precision);
  std::ifstream in(options.input);
  if (!in) throw reference::InputError("cannot open input file '" + options.input + "'");
  const PseudoGradientStream stream = read_stream(in, options.input);
  // Everything is computed before anything is written, and the file is replaced atomically: an error on
  // event 900 leaves no 899-line file that looks like a result, and never clobbers an earlier output.
  std::ostringstream lines;
  const ReplayTally tally = replay_reference(stream, options.input, options.optimizer, lines);
  if (options.output == "-") {
    std::cout << lines.str();
  } else {
    write_atomically(options.output, [&](std::ostream& out) { out << lines.str(); });
  }
  std::cerr << "cgad replay: " << options.optimizer.optimizer << " (reference, " << bits << "-bit MPFR): "
            << tally.events << " events, " << tally.nonfinite << " skipped for non-finite gradients, "
            << tally.zero_gate << " skipped at a zero gate -> " << options.output << "\n";
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
