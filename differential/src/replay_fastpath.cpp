#include "cgad/differential/replay_fastpath.hpp"

#include "cgad/differential/bf16_text.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/options.hpp"
#include "cgad/fastpath/engine.hpp"

#include <ostream>

namespace cgad::differential {
namespace {

EventRecord::Array float_array(std::string name, std::span<const float> values) {
  return {std::move(name), values.size(), [values](std::size_t i) { return core::to_decimal(values[i]); }};
}

}  // namespace

ReplayCounts replay_fastpath(const StreamHeader& header, const EventSource& next, const std::string& source,
                             const core::OptimizerOptions& optimizer, const fastpath::FastpathOptions& options,
                             std::ostream& notes, const RecordSink& sink) {
  const fastpath::StepConfig config = fastpath::step_config(optimizer, options);
  fastpath::FastpathParams params;
  params.tensors = header.tensors;
  const std::string header_where = source + ":" + std::to_string(header.line) + ": params";
  if (config.params == fastpath::ParamFormat::bf16) {
    for (std::size_t i = 0; i < header.params.size(); ++i) {
      params.bf16.push_back(differential::parse_bf16(header.params[i], header_where + "[" + std::to_string(i) + "]"));
    }
  } else {
    params.fp32 = parse_numbers<float>(header.params, header_where);
  }
  const std::unique_ptr<fastpath::FastpathEngine> engine =
      fastpath::make_fastpath_engine(options.device, config, std::move(params));
  ReplayCounts counts;
  std::vector<std::vector<float>> buffers;
  for (std::size_t i = 0;; ++i) {
    const std::optional<StreamEvent> event = next();
    if (!event) break;
    const std::string where = source + ":" + std::to_string(event->line);
    const std::vector<float> grad = parse_numbers<float>(event->grad, where + ": grad");
    fastpath::StepReport report;
    try {
      report = engine->step(grad, event->tau, event->fragment);
    } catch (const core::InputError& e) {
      throw core::InputError(where + ": " + e.what());
    }
    engine->advance_round();
    nlohmann::ordered_json head = event_record(i, *event, report, where, counts, notes);
    const fastpath::FastpathParams& now = engine->params();
    EventRecord::Array values = now.bf16.empty()
                                    ? float_array("params", now.fp32)
                                    : EventRecord::Array{"params", now.bf16.size(), [&now](std::size_t k) {
                                                           return differential::bf16_to_decimal(now.bf16[k]);
                                                         }};
    // Each buffer widened to float (4 bytes an element) while the record is written.
    const std::vector<std::string> names = engine->buffer_names();
    buffers.resize(names.size());
    std::vector<EventRecord::Array> arrays;
    for (std::size_t b = 0; b < names.size(); ++b) {
      buffers[b].resize(header.params.size());
      engine->read_buffer(names[b], buffers[b]);
      arrays.push_back(float_array(names[b], buffers[b]));
    }
    nlohmann::ordered_json counters = nlohmann::ordered_json::object();
    for (const auto& counter : engine->counters()) counters[counter.name] = counter.values;
    ++counts.events;
    sink(EventRecord(std::move(head), std::move(values), std::move(arrays), std::move(counters)));
  }
  return counts;
}

}  // namespace cgad::differential
