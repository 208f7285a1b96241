#include "cgad/fastpath/options.hpp"

namespace cgad::fastpath {

StepConfig fastpath_step_config(const core::OptimizerOptions& options) {
  StepConfig config;
  static_cast<core::OptimizerConfig<float, double>&>(config) =
      core::optimizer_config<float, double>(options, core::BetaComplement::of_decimal);
  // The decimals themselves, from which cgad semantics forms 1 − β (fastpath/detail/derived_constants.hpp); a β left
  // at its default is its default's decimal, the shortest that reads back to the float (fastpath::beta_decimals).
  config.beta1_decimal = options.beta1;
  config.beta2_decimal = options.beta2;
  config.momentum_decimal = options.momentum;
  return config;
}

void apply_fastpath_options(const FastpathOptions& options, StepConfig& config) {
  config.params = parse_param_format(options.params);
  config.state = parse_state_format(options.state);
  config.rounding = parse_rounding(options.rounding);
  config.seed = options.seed;
  config.q8_semantics = parse_q8_semantics(options.q8_semantics);
  config.v_map = parse_v_map(options.v_map);
  config.min_q8_size = options.min_q8_size;
  config.q8_codes = options.q8_codes;
  validate(config);
}

StepConfig step_config(const core::OptimizerOptions& optimizer, const FastpathOptions& options) {
  StepConfig config = fastpath_step_config(optimizer);
  apply_fastpath_options(options, config);
  return config;
}

}  // namespace cgad::fastpath
