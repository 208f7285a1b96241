#pragma once
// The seven outer optimizers by name, and one configuration that builds any of them.
#include "cgad/reference/delayed_nesterov.hpp"
#include "cgad/reference/gated_adam.hpp"
#include "cgad/reference/nesterov.hpp"

#include <array>
#include <memory>
#include <string>
#include <string_view>

namespace cgad::reference {

enum class OptimizerKind { cgad, pa_cgad, adam_decay, adam, nesterov, delayed_nesterov, sdm };

inline constexpr std::array<std::pair<std::string_view, OptimizerKind>, 7> kOptimizerNames{{
    {"cgad", OptimizerKind::cgad},
    {"pa-cgad", OptimizerKind::pa_cgad},
    {"adam-decay", OptimizerKind::adam_decay},
    {"adam", OptimizerKind::adam},
    {"nesterov", OptimizerKind::nesterov},
    {"delayed-nesterov", OptimizerKind::delayed_nesterov},
    {"sdm", OptimizerKind::sdm},
}};

inline std::string_view to_string(OptimizerKind kind) {
  for (const auto& [name, k] : kOptimizerNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

inline OptimizerKind parse_optimizer(std::string_view name) {
  for (const auto& [text, kind] : kOptimizerNames) {
    if (text == name) return kind;
  }
  throw InputError("unknown optimizer '" + std::string(name) +
                   "' (expected cgad, pa-cgad, adam-decay, adam, nesterov, delayed-nesterov or sdm)");
}

inline bool is_adam_family(OptimizerKind kind) {
  return kind == OptimizerKind::cgad || kind == OptimizerKind::pa_cgad || kind == OptimizerKind::adam_decay ||
         kind == OptimizerKind::adam;
}

template <RealScalar Real>
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::cgad;
  AdamHyper<Real> adam;
  NesterovHyper<Real> nesterov;
  Real alpha = parse_real<Real>("0.2", "alpha");
  Real tau_cut = Real(32);
  ZeroGatePolicy on_zero_gate = ZeroGatePolicy::apply;
  std::int64_t buffer = 4;    // Delayed Nesterov's N
  std::size_t fragments = 1;  // PA-CGAD's P; every other optimizer has exactly one fragment
};

// The gate an Adam-family optimizer of this kind uses.
template <RealScalar Real>
GateParams<Real> gate_of(const OptimizerConfig<Real>& config) {
  GateKind kind = GateKind::cosine;
  if (config.kind == OptimizerKind::adam_decay) kind = GateKind::exponential;
  if (config.kind == OptimizerKind::adam) kind = GateKind::none;
  return GateParams<Real>{kind, config.alpha, config.tau_cut};
}

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
