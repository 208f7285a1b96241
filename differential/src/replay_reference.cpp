#include "cgad/differential/replay_reference.hpp"

#include "cgad/reference/optimizers.hpp"

#include <ostream>

namespace cgad::differential {
namespace {

using reference::mpfr_real;

EventRecord::Array decimal_array(std::string name, std::span<const mpfr_real> values) {
  return {std::move(name), values.size(), [values](std::size_t i) { return core::to_decimal(values[i]); }};
}

}  // namespace

template <core::RealScalar Real>
nlohmann::ordered_json event_record(std::size_t index, const StreamEvent& event, const core::StepReport<Real>& report,
                                    const std::string& where, ReplayCounts& result, std::ostream& notes) {
  nlohmann::ordered_json record{{"event", index},
                                {"tau", event.tau},
                                {"fragment", event.fragment},
                                {"tau_effective", report.tau_effective},
                                {"sigma", nullptr},
                                {"skipped", !report.applied}};
  // A NaN/Inf event never reaches the gate, so it has no σ: null, not a made-up number.
  if (report.reason != core::SkipReason::nonfinite_gradient) record["sigma"] = core::to_decimal(report.sigma);
  if (!report.applied) record["skip_reason"] = std::string(core::to_string(report.reason));
  if (report.reason == core::SkipReason::nonfinite_gradient) {
    ++result.nonfinite;
    notes << "cgad: " << where << ": event " << index << " skipped: non-finite pseudo-gradient at element "
          << report.nonfinite_index << "; nothing changed\n";
  }
  if (report.reason == core::SkipReason::zero_gate) ++result.zero_gate;
  if (report.reason == core::SkipReason::overflowing_gradient) {
    ++result.overflowing;
    notes << "cgad: " << where << ": event " << index << " skipped: |sigma * grad| >= 2^63 at element "
          << report.nonfinite_index
          << " (the overflow rule: its square would leave no headroom in float); nothing changed\n";
  }
  return record;
}
template nlohmann::ordered_json event_record<float>(std::size_t, const StreamEvent&, const core::StepReport<float>&,
                                                    const std::string&, ReplayCounts&, std::ostream&);
template nlohmann::ordered_json event_record<mpfr_real>(std::size_t, const StreamEvent&,
                                                        const core::StepReport<mpfr_real>&, const std::string&,
                                                        ReplayCounts&, std::ostream&);

ReplayCounts replay_reference(const StreamHeader& header, const EventSource& next, const std::string& source,
                              const core::OptimizerOptions& options, std::ostream& notes, const RecordSink& sink) {
  const auto config = core::optimizer_config<mpfr_real>(options);
  std::vector<mpfr_real> params =
      parse_numbers<mpfr_real>(header.params, source + ":" + std::to_string(header.line) + ": params");
  const auto optimizer = reference::make_optimizer(config, params.size());
  ReplayCounts counts;
  for (std::size_t i = 0;; ++i) {
    const std::optional<StreamEvent> event = next();
    if (!event) break;
    const std::string where = source + ":" + std::to_string(event->line);
    const std::vector<mpfr_real> grad = parse_numbers<mpfr_real>(event->grad, where + ": grad");
    core::StepReport<mpfr_real> report;
    try {
      report = optimizer->apply(params, {grad, event->tau, event->fragment});
    } catch (const core::InputError& e) {
      throw core::InputError(where + ": " + e.what());
    }
    optimizer->advance_round();
    nlohmann::ordered_json head = event_record(i, *event, report, where, counts, notes);
    const auto buffers = optimizer->buffers();
    std::vector<EventRecord::Array> arrays;
    for (const auto& buffer : buffers) arrays.push_back(decimal_array(buffer.name, buffer.values));
    nlohmann::ordered_json counters = nlohmann::ordered_json::object();
    for (const auto& counter : optimizer->counters()) counters[counter.name] = counter.values;
    ++counts.events;
    sink(EventRecord(std::move(head), decimal_array("params", params), std::move(arrays), std::move(counters)));
  }
  return counts;
}

EventSource events_of(const PseudoGradientStream& stream) {
  return [&stream, i = std::size_t{0}]() mutable -> std::optional<StreamEvent> {
    if (i == stream.events.size()) return std::nullopt;
    return stream.events[i++];
  };
}

ReplayResult replay_reference(const PseudoGradientStream& stream, const std::string& source,
                              const core::OptimizerOptions& options, std::ostream& notes) {
  ReplayResult result;
  static_cast<ReplayCounts&>(result) = replay_reference(
      stream, events_of(stream), source, options, notes,
      [&](const EventRecord& record) { result.records.push_back(nlohmann::ordered_json::parse(record.dump())); });
  return result;
}

}  // namespace cgad::differential
