#include "cgad/differential/replay_fastpath.hpp"

#include "cgad/fastpath/bf16_text.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/engine.hpp"

#include <ostream>

namespace cgad::differential {
namespace {

fastpath::StepConfig step_config(const OptimizerOptions& optimizer, const FastpathOptions& options) {
  fastpath::StepConfig config = fastpath_step_config(optimizer);
  apply_fastpath_options(options, config);
  return config;
}

nlohmann::ordered_json float_array(std::span<const float> values) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (float x : values) out.push_back(reference::to_decimal(x));
  return out;
}

}  // namespace

void apply_fastpath_options(const FastpathOptions& options, fastpath::StepConfig& config) {
  config.params = fastpath::parse_param_format(options.params);
  config.state = fastpath::parse_state_format(options.state);
  config.rounding = fastpath::parse_rounding(options.rounding);
  config.seed = options.seed;
  config.q8_semantics = fastpath::parse_q8_semantics(options.q8_semantics);
  config.v_map = fastpath::parse_v_map(options.v_map);
  config.min_q8_size = options.min_q8_size;
  fastpath::validate(config);
}

ReplayCounts replay_fastpath(const StreamHeader& header, const EventSource& next, const std::string& source,
                             const OptimizerOptions& optimizer, const FastpathOptions& options, std::ostream& notes,
                             const RecordSink& sink) {
  const fastpath::StepConfig config = step_config(optimizer, options);
  fastpath::FastpathParams params;
  params.tensors = header.tensors;
  if (config.params == fastpath::ParamFormat::bf16) {
    for (std::size_t i = 0; i < header.params.size(); ++i) {
      params.bf16.push_back(fastpath::parse_bf16(header.params[i], source + ":params[" + std::to_string(i) + "]"));
    }
  } else {
    params.fp32 = parse_numbers<float>(header.params, source + ":params");
  }
  const std::unique_ptr<fastpath::FastpathEngine> engine = fastpath::make_fastpath_engine(options.device, config, std::move(params));
  ReplayCounts counts;
  std::vector<float> buffer(header.params.size());
  for (std::size_t i = 0;; ++i) {
    const std::optional<StreamEvent> event = next();
    if (!event) break;
    const std::string where = source + ":" + std::to_string(event->line);
    const std::vector<float> grad = parse_numbers<float>(event->grad, where + ": grad");
    fastpath::StepReport report;
    try {
      report = engine->step(grad, event->tau, event->fragment);
    } catch (const reference::InputError& e) {
      throw reference::InputError(where + ": " + e.what());
    }
    engine->advance_round();
    nlohmann::ordered_json record = event_record(i, *event, report, where, counts, notes);
    const fastpath::FastpathParams& now = engine->params();
    if (!now.bf16.empty()) {
      nlohmann::ordered_json values = nlohmann::ordered_json::array();
      for (fastpath::bf16 x : now.bf16) values.push_back(fastpath::bf16_to_decimal(x));
      record["params"] = std::move(values);
    } else {
      record["params"] = float_array(now.fp32);
    }
    nlohmann::ordered_json state = nlohmann::ordered_json::object();
    for (const std::string& name : engine->buffer_names()) {
      engine->read_buffer(name, buffer);
      state[name] = float_array(buffer);
    }
    for (const auto& counter : engine->counters()) state[counter.name] = counter.values;
    record["state"] = std::move(state);
    ++counts.events;
    sink(record);
  }
  return counts;
}

}  // namespace cgad::differential
