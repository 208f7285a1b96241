#pragma once
// One configuration of any outer optimizer, in the scalar type of the run: what reference::make_optimizer builds,
// and the part of the fast path's configuration that says which optimizer with which hyperparameters
// (fastpath::StepConfig derives from OptimizerConfig<float, double>, fastpath/config.hpp).
#include "cgad/core/gate.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/optimizer_kind.hpp"
#include "cgad/core/real_scalar.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::core {

// The hyperparameters in Real; the gate's α and τ_cut in Gate, which is Real but for the fast path: it steps in float
// and computes σ from the user's α and τ_cut in double (fastpath/config.hpp says why).
template <RealScalar Real, RealScalar Gate = Real>
struct OptimizerConfig {
  OptimizerKind optimizer = OptimizerKind::cgad;
  AdamHyper<Real> adam;
  NesterovHyper<Real> nesterov;
  Gate alpha = parse_real<Gate>("0.2", "alpha");
  Gate tau_cut = Gate(32);
  ZeroGatePolicy on_zero_gate = ZeroGatePolicy::apply;
  std::int64_t buffer = 4;    // Delayed Nesterov's N
  std::size_t fragments = 1;  // PA-CGAD's P; every other optimizer has exactly one fragment
};

// The gate an Adam-family optimizer of this kind uses.
template <RealScalar Real, RealScalar Gate>
GateParams<Gate> gate_of(const OptimizerConfig<Real, Gate>& config) {
  GateKind kind = GateKind::cosine;
  if (config.optimizer == OptimizerKind::adam_decay) kind = GateKind::exponential;
  if (config.optimizer == OptimizerKind::adam) kind = GateKind::none;
  return GateParams<Gate>{kind, config.alpha, config.tau_cut};
}

}  // namespace cgad::core
