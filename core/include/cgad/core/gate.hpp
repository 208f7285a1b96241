#pragma once
// The staleness gate of CGAD (docs/design.md §3), defined here once for every part of cgad.
//
//   γ(τ) = ½(1 + cos(πτ/τ_cut)) for 0 ≤ τ ≤ τ_cut,  γ(τ) = 0 for τ > τ_cut,   σ(τ) = γ(τ)·e^{−ατ}.
//
// We evaluate γ through the identity ½(1 + cos 2x) = sin²(π/2 − x), i.e. γ(τ) = sin²(π(τ_cut − τ)/(2τ_cut)).
// The textbook form cancels catastrophically near τ_cut (1 + cos x with cos x ≈ −1): at τ = τ_cut − 1,
// τ_cut = 32 it loses about 9 bits; the sine form keeps a few-ulp relative error on all of [0, τ_cut]
// because τ_cut − τ is exact for integer τ and sin is well-conditioned near 0. σ(0) = 1 and σ(τ ≥ τ_cut) = 0
// are returned exactly, as the contract demands, without relying on sin(RN(π/2)) rounding to 1.
#include "cgad/core/errors.hpp"
#include "cgad/core/real_scalar.hpp"

#include <cmath>
#include <string>

namespace cgad::core {

// Which staleness factor an Adam-family optimizer applies.
enum class GateKind {
  cosine,       // CGAD: σ(τ) = γ(τ)·e^{−ατ}
  exponential,  // Adam-Decay: γ ≡ 1, σ(τ) = e^{−ατ}
  none,         // Adam: σ ≡ 1
};

template <RealScalar Real>
struct GateParams {
  GateKind kind = GateKind::cosine;
  Real alpha;    // decay per outer round of delay, α ≥ 0
  Real tau_cut;  // cosine cutoff in outer rounds, τ_cut > 0 (used by the cosine gate only)
};

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

// The cosine gate γ(τ) ∈ [0, 1]; 1 for the exponential and none kinds.
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

// The staleness factor σ(τ) ∈ [0, 1]: σ(0) = 1, non-increasing, exactly 0 for τ ≥ τ_cut (cosine kind).
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
