#pragma once
// Runs a pseudo-gradient stream through a reference (MPFR) optimizer and records the parameters and state
// after every event — the engine behind `cgad replay --backend reference` and the report's example replay.
#include "optimizer_options.hpp"
#include "replay_stream.hpp"

#include "cgad/reference/outer_optimizer.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace cgad::cli {

struct ReplayResult {
  // One record per event: {"event", "tau", "fragment", "tau_effective", "sigma", "skipped", ["skip_reason"],
  // "params", "state"}, every real as a decimal string that reads back to the exact value.
  std::vector<nlohmann::ordered_json> records;
  std::size_t nonfinite = 0;  // events skipped for a NaN/Inf pseudo-gradient
  std::size_t zero_gate = 0;  // events skipped at σ = 0 under on_zero_gate = skip
  std::size_t overflowing = 0;  // events skipped because |σ·Δ| ≥ 2^63 somewhere (the overflow rule)
};

// The fields every backend writes for an event, before "params" and "state"; counts the skip in `result` and
// reports a NaN/Inf event on `notes`.
template <reference::RealScalar Real>
nlohmann::ordered_json event_record(std::size_t index, const StreamEvent& event, const reference::StepReport<Real>& report,
                                    const std::string& where, ReplayResult& result, std::ostream& notes);

// Uses the current working precision. Every event is one outer round (advance_round after each).
// NaN/Inf events are reported on `notes` as they are skipped. Throws InputError naming `source` and line.
ReplayResult replay_reference(const PseudoGradientStream& stream, const std::string& source,
                              const OptimizerOptions& options, std::ostream& notes);

}  // namespace cgad::cli
