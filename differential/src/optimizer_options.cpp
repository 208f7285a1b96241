#include "cgad/differential/optimizer_options.hpp"

namespace cgad::differential {

fastpath::StepConfig fastpath_step_config(const OptimizerOptions& options) {
  const auto parsed = optimizer_config<float>(options);
  fastpath::StepConfig config;
  config.optimizer = parsed.kind;
  config.adam = parsed.adam;
  config.nesterov = parsed.nesterov;
  // The gate from the user's decimal α, rounded once to double (parsed here after optimizer_config checked it), and
  // τ_cut, an integer, exactly.
  config.alpha = core::parse_real<double>(options.alpha, "alpha");
  config.tau_cut = static_cast<double>(options.tau_cut);
  config.on_zero_gate = parsed.on_zero_gate;
  config.fragments = parsed.fragments;
  return config;
}

}  // namespace cgad::differential
