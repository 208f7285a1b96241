#pragma once
// One configuration of any outer optimizer, in the scalar type of the run: what reference::make_optimizer builds
// and what the fast path's configuration converts into for a differential run (fastpath/config.hpp).
#include "cgad/core/gate.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/optimizer_kind.hpp"
#include "cgad/core/real_scalar.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::core {

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

}  // namespace cgad::core
