#include "cgad/differential/optimizer_options.hpp"

namespace cgad::differential {

fastpath::StepConfig fastpath_step_config(const OptimizerOptions& options) {
  const auto parsed = optimizer_config<float>(options);
  fastpath::StepConfig config;
  config.optimizer = parsed.kind;
  config.adam = parsed.adam;
  // The decimals themselves, from which cgad semantics forms 1 − β (fastpath/detail/derived_constants.hpp); a β left
  // at its default is its default's decimal, the shortest that reads back to the float (fastpath::beta_decimals).
  config.beta1_decimal = options.beta1;
  config.beta2_decimal = options.beta2;
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
