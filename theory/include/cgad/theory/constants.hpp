#pragma once
// The constants of the convergence bound (docs/design.md §6, theory/README.md §2), computed in MPFR and
// enclosed in certified MPFI intervals:
//   B1 = sup_{τ≥0} τ·σ(τ)  ≤ 1/(eα)        B2 = sup_{τ≥0} τ²·σ(τ)  ≤ 4/(eα)²
//   W  = Σ_{τ=1}^{τ_cut} σ(τ) ≤ 1/(e^α − 1)
// for the cosine gate σ (CGAD). The sup over real τ is taken on [0, τ_cut] (σ = 0 beyond); the integer
// versions take the max over τ ∈ {0, …, τ_cut}, the delays an optimizer actually sees.
//
// α = 0 is accepted: B1, B2, W are finite (the cutoff alone bounds them) but 1/(eα), 4/(eα)² and
// 1/(e^α − 1) are +∞, so each inequality is reported as proved *vacuously* (comparison = +∞).
#include "cgad/reference/real.hpp"
#include "cgad/theory/interval.hpp"

#include <functional>
#include <string>
#include <vector>

namespace cgad::theory {

// Largest τ_cut accepted: W sums τ_cut interval terms, and a typo should not run for an hour.
inline constexpr long kMaxBoundTauCut = 1'000'000;

enum class Verdict {
  proved,          // hi(constant) ≤ lo(comparison): the inequality holds, certified
  proved_vacuous,  // the comparison is +∞ (α = 0)
  refuted,         // lo(constant) > hi(comparison): the inequality is false, certified
  undetermined,    // the enclosures overlap: no conclusion at this precision
};
const char* to_string(Verdict verdict);

struct CertifiedInequality {
  std::string statement;  // e.g. "B1 <= 1/(e*alpha)": constant <= comparison
  Interval constant;      // enclosure of the left-hand side
  Interval comparison;    // enclosure of the right-hand side ([+inf, +inf] when α = 0)
  Verdict verdict;
};

// sup_{τ ≥ 0} τ^k σ(τ), real and integer τ.
struct SupConstant {
  unsigned k = 1;
  Interval value;                         // certified enclosure of the sup over real τ
  Interval argmax;                        // certified enclosure of the unique maximizer τ* ∈ (0, τ_cut)
  reference::mpfr_real value_mpfr;        // τ*^k·core::sigma(τ*) at the working precision, τ* = mid(argmax)
  reference::mpfr_real argmax_mpfr;       // mid(argmax)
  Interval integer_value;                 // certified enclosure of max_{τ ∈ {0..τ_cut}} τ^k σ(τ)
  long integer_argmax = 0;                // an integer maximizer (floor or ceil of τ*)
  bool integer_argmax_certified = false;  // its enclosure lies strictly above every other candidate's
  Interval cutoff_bound;  // τ_cut^k·sup_{x∈[0,1]} x^k cos²(πx/2): the α = 0 value, ≥ the constant
};

struct BoundConstants {
  std::string alpha_text;
  long tau_cut = 0;
  unsigned precision_bits = 0;
  SupConstant b1, b2;
  Interval w;                                     // certified enclosure of Σ_{τ=1}^{τ_cut} σ(τ)
  reference::mpfr_real w_mpfr;                    // the same sum of core::sigma at the working precision
  Interval w_cutoff_bound;                        // (τ_cut − 1)/2, the α = 0 value of W (exact)
  std::vector<CertifiedInequality> inequalities;  // B1 ≤ 1/(eα), B2 ≤ 4/(eα)², W ≤ 1/(e^α−1), integer B1/B2
  // α·τ_cut ≥ 1: the cutoff lies past the exponential's peak 1/α, and the bound 1/(eα) is tight up to the
  // factor cos²(π/(2ατ_cut)) (theory/README.md §4). Otherwise the cutoff bound τ_cut·κ1 is the smaller one.
  bool cutoff_past_peak = false;
  Interval b1_lower_at_inverse_alpha;  // (1/α)·σ(1/α) = cos²(π/(2ατ_cut))/(eα) when α·τ_cut ≥ 1
};

// Validates α (decimal ≥ 0, finite) and τ_cut (integer in [1, kMaxBoundTauCut]); throws InputError.
// Everything is computed at the current working precision (reference::set_working_precision_bits).
// `on_progress` (optional) sees (terms of W summed, 2·τ_cut): W's two sums dominate for large τ_cut.
BoundConstants compute_bound_constants(const std::string& alpha_text, long tau_cut,
                                       const std::function<void(long, long)>& on_progress = {});

// The certified sup of τ^k σ(τ) for an interval α (exposed for the scaling-law tests: B_k(α, C) =
// C^k·B_k(αC, 1)). Precondition: alpha ⊆ [0, ∞), tau_cut ≥ 1.
SupConstant certified_sup(unsigned k, const Interval& alpha, long tau_cut);

// Certified Σ_{τ=1}^{τ_cut} σ(τ) for an interval α; `on_term` (optional) is called after each term.
Interval certified_stale_weight(const Interval& alpha, long tau_cut, const std::function<void(long)>& on_term = {});

}  // namespace cgad::theory
