#pragma once
// The gate's definitions (cgad/core/gate.hpp has the formula and the contract), included only by the libraries'
// sources that instantiate them: core/src/gate.cpp for float, double and long double, reference/src/core_instances.cpp
// for mpfr_real. They are not inline, so the `extern template` declarations keep every other translation unit from
// compiling them (docs/design.md §2, "Which flags are usage requirements").
#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/core/real_scalar.hpp"

#include <cmath>
#include <string>

namespace cgad::core {

template <RealScalar Real>
void validate(const GateParams<Real>& gate) {
  if (!is_finite(gate.alpha) || gate.alpha < 0) {
    throw InputError("alpha must be finite and >= 0, got " + show(gate.alpha));
  }
  if (gate.kind == GateKind::cosine && (!is_finite(gate.tau_cut) || gate.tau_cut <= 0)) {
    throw InputError("tau_cut must be finite and > 0, got " + show(gate.tau_cut));
  }
}

template <RealScalar Real>
void validate_staleness(const Real& tau) {
  if (!(tau >= 0) || !is_finite(tau)) throw InputError("staleness tau must be finite and >= 0, got " + show(tau));
}

template <RealScalar Real>
Real gamma(const Real& tau, const GateParams<Real>& gate) {
  ScalarTraits<Real>::prepare_thread();
  validate_staleness(tau);
  if (gate.kind != GateKind::cosine || tau == 0) return Real(1);
  if (tau >= gate.tau_cut) return Real(0);
  using std::sin;
  const Real remaining = gate.tau_cut - tau;
  const Real angle = ScalarTraits<Real>::pi() * remaining / (2 * gate.tau_cut);
  const Real s = sin(angle);
  return Real(s * s);
}

template <RealScalar Real>
Real sigma(const Real& tau, const GateParams<Real>& gate) {
  ScalarTraits<Real>::prepare_thread();
  validate_staleness(tau);
  switch (gate.kind) {
    case GateKind::none:
      return Real(1);
    case GateKind::exponential:
    case GateKind::cosine: {
      const Real g = gamma(tau, gate);
      if (g == 0) return Real(0);
      using std::exp;
      const Real decay = exp(Real(-(gate.alpha * tau)));
      return Real(g * decay);
    }
  }
  throw InputError("unknown gate kind");
}

}  // namespace cgad::core
