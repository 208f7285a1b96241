// make_optimizer (optimizers.hpp) and the optimizers it builds, instantiated for the scalar types cgad runs them in;
// compiled here with cgad's flags, never in a user's translation unit (docs/design.md §2).
#include "cgad/reference/optimizers.hpp"

#include "cgad/core/optimizer_kind.hpp"
#include "cgad/reference/detail/delayed_nesterov.hpp"
#include "cgad/reference/detail/gated_adam.hpp"
#include "cgad/reference/detail/nesterov.hpp"

#include <memory>
#include <string>

namespace cgad::reference {

template <core::RealScalar Real>
std::unique_ptr<OuterOptimizer<Real>> make_optimizer(const core::OptimizerConfig<Real>& config,
                                                     std::size_t parameters) {
  if (config.fragments != 1 && config.optimizer != core::OptimizerKind::pa_cgad) {
    throw core::InputError("only pa-cgad takes fragments; " + std::string(core::to_string(config.optimizer)) + " got " +
                           std::to_string(config.fragments));
  }
  const std::string name(core::to_string(config.optimizer));
  switch (config.optimizer) {
    case core::OptimizerKind::cgad:
    case core::OptimizerKind::adam_decay:
    case core::OptimizerKind::adam:
      return std::make_unique<GatedAdam<Real>>(name, core::FragmentLayout(parameters, 1), config.adam,
                                               core::gate_of(config), config.on_zero_gate,
                                               GatedAdam<Real>::Ages::ignore);
    case core::OptimizerKind::pa_cgad:
      return std::make_unique<GatedAdam<Real>>(name, core::FragmentLayout(parameters, config.fragments), config.adam,
                                               core::gate_of(config), config.on_zero_gate,
                                               GatedAdam<Real>::Ages::gate_by_max);
    case core::OptimizerKind::nesterov:
      return std::make_unique<Nesterov<Real>>(parameters, config.nesterov, Nesterov<Real>::Staleness::ignore);
    case core::OptimizerKind::sdm:
      return std::make_unique<Nesterov<Real>>(parameters, config.nesterov, Nesterov<Real>::Staleness::dampen);
    case core::OptimizerKind::delayed_nesterov:
      return std::make_unique<DelayedNesterov<Real>>(parameters, config.nesterov, config.buffer);
  }
  throw core::InputError("unknown optimizer kind");
}

CGAD_REFERENCE_OPTIMIZER_INSTANCES(, float)
CGAD_REFERENCE_OPTIMIZER_INSTANCES(, double)
CGAD_REFERENCE_OPTIMIZER_INSTANCES(, mpfr_real)

}  // namespace cgad::reference
