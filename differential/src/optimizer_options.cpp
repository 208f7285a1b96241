#include "cgad/differential/optimizer_options.hpp"

namespace cgad::differential {

fastpath::StepConfig fastpath_step_config(const OptimizerOptions& options) {
  const auto parsed = optimizer_config<float>(options);
  fastpath::StepConfig config;
  config.optimizer = parsed.kind;
  config.adam = parsed.adam;
  config.nesterov = parsed.nesterov;
  config.alpha = parsed.alpha;
  config.tau_cut = parsed.tau_cut;
  config.on_zero_gate = parsed.on_zero_gate;
  config.fragments = parsed.fragments;
  return config;
}

}  // namespace cgad::differential
