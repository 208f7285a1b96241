#pragma once
// The staleness factor as the fast path's step takes it: one float per event (and PA-CGAD's table of ages),
// computed on the host from the configuration's double α and τ_cut, never from a float-rounded α.
//
// CGAD, PA-CGAD, Adam-Decay: the reference's gate (core/gate.hpp, the sine form) evaluated in long double
// (p ≥ 64 significand bits, u = 2^-p; α, τ_cut and the integer τ < 2^63 are exact there) and rounded once to float.
// Relative error before that rounding, to first order:
//   the angle π·(τ_cut − τ)/(2τ_cut): the subtraction, π, the product and the quotient round once each: 4u;
//   sin: its condition number x·cot x is ≤ 1 on (0, π/2], so 4u + e_sin; the square doubles it and rounds: 8u + 2e_sin
//   + u; e^{−ατ}: α·τ rounds once, which e^{−x} (condition number x = ατ) turns into ατ·u, plus e_exp; the product: u.
//   Total: (ατ + 10)u + 2e_sin + e_exp.
// With the library's sinl and expl within 4 ulps each, that is at most (ατ + 22)·2^-64 — below 2^-57 for every
// ατ ≤ 104 (past that σ < 2^-150 and rounds to 0 either way). So the float is the one nearest σ(τ) of this double α
// and τ_cut unless σ(τ) lies within that relative distance of a float midpoint. A user's decimal α (the command
// line, Python) is first rounded to double, which moves σ by at most ατ·2^-53 more: ≤ 2^-46 in all. Checked against
// the MPFR reference at 256 bits, α parsed from its decimal, for every τ below τ_cut at several α and τ_cut
// (proptests/fastpath/fastpath_sigma_rounding_test.cpp).
//
// SDM: 1/(1 + τ) rounded to the nearest float by integer division, exact for every τ < 2^63.
#include "cgad/fastpath/config.hpp"
#include "cgad/core/gate.hpp"

#include <cstdint>

namespace cgad::fastpath {

// This configuration's gate (cosine, exponential or none) in long double, exactly its double α and τ_cut.
core::GateParams<long double> long_double_gate(const StepConfig& config);

// σ(τ) of `gate`, rounded once to float (see above); τ ≥ 0.
float gate_sigma(const core::GateParams<long double>& gate, std::int64_t tau);

// Whether the gate is exactly zero at τ (γ(τ) = 0: the cosine gate at τ ≥ τ_cut), as the reference decides it.
bool gate_is_zero(const core::GateParams<long double>& gate, std::int64_t tau);

// SDM's 1/(1 + τ), the float nearest it; τ ≥ 0.
float sdm_scale(std::int64_t tau);

}  // namespace cgad::fastpath
