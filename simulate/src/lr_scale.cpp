#include "cgad/simulate/lr_scale.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/simulate/objectives.hpp"

#include <cmath>

namespace cgad::simulate {

std::vector<float> lr_multipliers(ObjectiveKind kind, std::size_t size, LrScale scale, std::size_t depth) {
  std::vector<float> multipliers(tensor_sizes(kind, size, depth).size(), 1.0f);
  if (scale == LrScale::mup && kind == ObjectiveKind::teacher_student) {
    const float base_over_width = static_cast<float>(static_cast<double>(kMupBaseWidth) / static_cast<double>(size));
    // mlp.hpp's layout: W_1, b_1, ..., W_depth, b_depth, w_out, b_out. The hidden weights W_2..W_depth (size ×
    // size) and the readout w_out get η·n₀/n; W_1 and every bias keep η.
    for (std::size_t l = 1; l < depth; ++l) multipliers[2 * l] = base_over_width;
    multipliers[2 * depth] = base_over_width;
  }
  return multipliers;
}

double readout_init_multiplier(std::size_t width, LrScale scale) {
  if (scale == LrScale::none) return 1.0;
  return std::sqrt(static_cast<double>(kMupBaseWidth) / static_cast<double>(width));
}

void validate_lr_scale(const SimulationSpec& spec) {
  if (spec.lr_scale == LrScale::none) return;
  if (spec.inner.kind != InnerOptimizerKind::adamw) {
    throw core::InputError("lr scale mup applies Adam's muP rules; the inner sgd would need its SGD rules");
  }
  const core::OptimizerKind method =
      spec.delayed_nesterov ? core::OptimizerKind::delayed_nesterov : spec.outer.optimizer;
  if (!core::is_adam_family(method)) {
    throw core::InputError("lr scale mup applies Adam's muP rules; " + std::string(core::to_string(method)) +
                           " would need its SGD rules");
  }
  if (method == core::OptimizerKind::pa_cgad) {
    throw core::InputError(
        "lr scale mup gives each tensor its own optimizer; pa-cgad's fragments are slices of "
        "the flat parameter vector");
  }
}

}  // namespace cgad::simulate
