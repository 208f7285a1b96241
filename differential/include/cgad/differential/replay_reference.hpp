#pragma once
// Runs a pseudo-gradient stream through a reference (MPFR) optimizer and records the parameters and state
// after every event — the engine behind `cgad replay --backend reference` and the report's example replay.
#include "cgad/differential/event_record.hpp"
#include "cgad/core/optimizer_options.hpp"
#include "cgad/differential/replay_stream.hpp"

#include "cgad/reference/outer_optimizer.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cgad::differential {

// What a replay counts, beside its records.
struct ReplayCounts {
  std::size_t events = 0;
  std::size_t nonfinite = 0;    // events skipped for a NaN/Inf pseudo-gradient
  std::size_t zero_gate = 0;    // events skipped at σ = 0 under on_zero_gate = skip
  std::size_t overflowing = 0;  // events skipped by the overflow rule (|σ·Δ| ≥ 2^63 somewhere)
};

struct ReplayResult : ReplayCounts {
  // One record per event: {"event", "tau", "fragment", "tau_effective", "sigma", "skipped", ["skip_reason"],
  // "params", "state"}, every real as a decimal string that reads back to the exact value.
  std::vector<nlohmann::ordered_json> records;
};

// Where a streaming replay gets its events (nothing: the end) and where each record goes as soon as it exists,
// so that a replay holds one event at a time, whatever the stream's length, and never a record's text
// (event_record.hpp: the sink writes it element by element).
using EventSource = std::function<std::optional<StreamEvent>()>;
using RecordSink = std::function<void(const EventRecord&)>;

// The fields every backend writes for an event, before "params" and "state"; counts the skip in `counts` and
// reports a NaN/Inf or overflowing event on `notes`.
template <core::RealScalar Real>
nlohmann::ordered_json event_record(std::size_t index, const StreamEvent& event, const core::StepReport<Real>& report,
                                    const std::string& where, ReplayCounts& counts, std::ostream& notes);

// Uses the current working precision. Every event is one outer round (advance_round after each).
// NaN/Inf events are reported on `notes` as they are skipped. Throws InputError naming `source` and line.
ReplayCounts replay_reference(const StreamHeader& header, const EventSource& next, const std::string& source,
                              const core::OptimizerOptions& options, std::ostream& notes, const RecordSink& sink);
// The same over a stream in memory, keeping the records (the report's built-in stream).
ReplayResult replay_reference(const PseudoGradientStream& stream, const std::string& source,
                              const core::OptimizerOptions& options, std::ostream& notes);

// An EventSource over a stream in memory.
EventSource events_of(const PseudoGradientStream& stream);

}  // namespace cgad::differential
