#pragma once
// Shared by the theory tests: an independent high-precision evaluation of the bound's constants, built
// only from core::sigma (never from theory/'s interval code), and a guard that sets the MPFR working
// precision for one scope and restores the previous one.
#include "cgad/core/gate.hpp"
#include "cgad/reference/real.hpp"

#include <mpfr.h>

namespace cgad::theory_test {

using reference::mpfr_real;

// Precision of the independent evaluations: far above the 257 bits the enclosures are computed at, so their
// own rounding (≤ 2^-590 relative, see below) cannot decide a containment test.
inline constexpr unsigned kIndependentBits = 600;

using reference::PrecisionScope;

inline core::GateParams<mpfr_real> cosine_gate(const char* alpha, long tau_cut) {
  return {core::GateKind::cosine, core::parse_real<mpfr_real>(alpha, "alpha"), mpfr_real(tau_cut)};
}

// max over τ ∈ [0, τ_cut] of τ^k σ(τ) by golden-section search on core::sigma, at the current precision.
// τ^k σ(τ) is unimodal (theory/README.md §2), so the bracket keeps the maximizer while the comparisons are
// decided correctly; the search stops when the bracket is below τ_cut·2^-280, where the value's deficit
// ½|h''|δ² is below h·2^-500 for |h''/h| < 2^20 (true for α ≤ 5, τ_cut ≤ 2^11, the tests' range).
inline mpfr_real golden_section_max(unsigned k, const core::GateParams<mpfr_real>& gate) {
  auto h = [&](const mpfr_real& tau) { return mpfr_real(pow(tau, k) * core::sigma(tau, gate)); };
  const mpfr_real inv_phi = mpfr_real(mpfr_real(sqrt(mpfr_real(5))) - 1) / 2;
  mpfr_real a(0), b(gate.tau_cut);
  mpfr_real c = b - inv_phi * (b - a), d = a + inv_phi * (b - a);
  mpfr_real hc = h(c), hd = h(d);
  mpfr_real best = hc > hd ? hc : hd;
  const mpfr_real stop = ldexp(gate.tau_cut, -280);
  while (b - a > stop) {
    if (hc > hd) {
      b = d;
      d = c;
      hd = hc;
      c = b - inv_phi * (b - a);
      hc = h(c);
      if (hc > best) best = hc;
    } else {
      a = c;
      c = d;
      hc = hd;
      d = a + inv_phi * (b - a);
      hd = h(d);
      if (hd > best) best = hd;
    }
  }
  return best;
}

// x·(1 + 2^e) for x ≥ 0, i.e. x nudged up by a relative 2^e (e < 0).
inline mpfr_real nudge(const mpfr_real& x, int e) {
  return mpfr_real(x + ldexp(x, e));
}

}  // namespace cgad::theory_test
