#pragma once
// Any of the seven outer optimizers, built from one configuration (core/optimizer_config.hpp).
#include "cgad/reference/delayed_nesterov.hpp"
#include "cgad/reference/gated_adam.hpp"
#include "cgad/reference/nesterov.hpp"

#include <array>
#include <memory>
#include <string>
#include <string_view>

namespace cgad::reference {

template <RealScalar Real>
std::unique_ptr<OuterOptimizer<Real>> make_optimizer(const OptimizerConfig<Real>& config, std::size_t parameters) {
  if (config.fragments != 1 && config.kind != OptimizerKind::pa_cgad) {
    throw InputError("only pa-cgad takes fragments; " + std::string(to_string(config.kind)) + " got " +
                     std::to_string(config.fragments));
  }
  const std::string name(to_string(config.kind));
  switch (config.kind) {
    case OptimizerKind::cgad:
    case OptimizerKind::adam_decay:
    case OptimizerKind::adam:
      return std::make_unique<GatedAdam<Real>>(name, FragmentLayout(parameters, 1), config.adam, gate_of(config),
                                               config.on_zero_gate, GatedAdam<Real>::Ages::ignore);
    case OptimizerKind::pa_cgad:
      return std::make_unique<GatedAdam<Real>>(name, FragmentLayout(parameters, config.fragments), config.adam,
                                               gate_of(config), config.on_zero_gate,
                                               GatedAdam<Real>::Ages::gate_by_max);
    case OptimizerKind::nesterov:
      return std::make_unique<Nesterov<Real>>(parameters, config.nesterov, Nesterov<Real>::Staleness::ignore);
    case OptimizerKind::sdm:
      return std::make_unique<Nesterov<Real>>(parameters, config.nesterov, Nesterov<Real>::Staleness::dampen);
    case OptimizerKind::delayed_nesterov:
      return std::make_unique<DelayedNesterov<Real>>(parameters, config.nesterov, config.buffer);
  }
  throw InputError("unknown optimizer kind");
}

}  // namespace cgad::reference
