#pragma once
// The staleness gate of CGAD (docs/design.md §3), declared here for every part of cgad and defined once, in
// detail/gate_impl.hpp.
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

// InputError unless α is finite and ≥ 0 and (cosine kind) τ_cut is finite and > 0.
template <RealScalar Real>
void validate(const GateParams<Real>& gate);

// InputError unless τ is finite and ≥ 0.
template <RealScalar Real>
void validate_staleness(const Real& tau);

// The cosine gate γ(τ) ∈ [0, 1]; 1 for the exponential and none kinds.
template <RealScalar Real>
Real gamma(const Real& tau, const GateParams<Real>& gate);

// The staleness factor σ(τ) ∈ [0, 1]: σ(0) = 1, non-increasing, exactly 0 for τ ≥ τ_cut (cosine kind).
template <RealScalar Real>
Real sigma(const Real& tau, const GateParams<Real>& gate);

// The functions above for one scalar type, as explicit instantiations: declared `extern` here for the hardware types
// (and in reference/real.hpp for mpfr_real), defined in the libraries that compile them (core/src/gate.cpp,
// reference/src/core_instances.cpp) from detail/gate_impl.hpp, so that no user's translation unit compiles the
// gate's arithmetic under its own flags (docs/design.md §2, "Which flags are usage requirements").
#define CGAD_CORE_GATE_INSTANCES(EXTERN, Real)                            \
  EXTERN template void validate<Real>(const GateParams<Real>&);           \
  EXTERN template void validate_staleness<Real>(const Real&);             \
  EXTERN template Real gamma<Real>(const Real&, const GateParams<Real>&); \
  EXTERN template Real sigma<Real>(const Real&, const GateParams<Real>&);
CGAD_CORE_FOR_HARDWARE_SCALARS(CGAD_CORE_GATE_INSTANCES, extern)

}  // namespace cgad::core
