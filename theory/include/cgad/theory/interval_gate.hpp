#pragma once
// The cosine gate of docs/design.md §3 in interval arithmetic: the ONE place theory/ evaluates the gate formula
// itself (the MPFR gate lives in core/gate.hpp and is cross-checked against this in
// proptests/theory/theory_interval_gate_test.cpp). Both follow the same identity,
//   σ(τ) = ½(1 + cos(πτ/τ_cut))·e^{−ατ} = sin²(π(τ_cut − τ)/(2τ_cut))·e^{−ατ}   for 0 ≤ τ ≤ τ_cut,
// and σ(τ) = 0 for τ ≥ τ_cut.
#include "cgad/theory/interval.hpp"

namespace cgad::theory {

// The gate parameters as intervals: α enclosed from the user's decimal, τ_cut an exact positive integer.
struct IntervalGate {
  Interval alpha;
  long tau_cut;
};

// An enclosure of {σ(τ) : τ ∈ tau}. Precondition (checked): tau ⊆ [0, τ_cut]. Rigor: every MPFI operation
// encloses its exact image, so the composition encloses the image of the whole formula.
Interval sigma_enclosure(const Interval& tau, const IntervalGate& gate);

// An enclosure of τ^k·σ(τ) over tau ⊆ [0, τ_cut] (the weight whose sup is B_k, docs/design.md §6).
Interval weighted_sigma_enclosure(const Interval& tau, unsigned k, const IntervalGate& gate);

// An enclosure of d/dτ ln(τ^k σ(τ)) = k/τ − α − (π/τ_cut)·tan(πτ/(2τ_cut)) over tau ⊆ (0, τ_cut).
// (ln γ(τ) = 2 ln cos(πτ/(2τ_cut)), whose derivative is −(π/τ_cut)·tan(πτ/(2τ_cut)).) It is strictly
// decreasing on (0, τ_cut), from +∞ to −∞, so τ^k σ(τ) has exactly one critical point there: its maximum.
Interval log_weight_derivative(const Interval& tau, unsigned k, const IntervalGate& gate);

}  // namespace cgad::theory
