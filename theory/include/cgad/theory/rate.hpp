#pragma once
// What the bound says once η is chosen, and what "O(1/e^α)" can mean (theory/README.md §2a, §5).
//
// Optimized η. Dividing (S) by ρ·Σσ_t bounds the σ-weighted mean of ‖∇f(x_{t−τ_t})‖² by
//     A/η + B·η,   A = (f(x_0) − f*)/(ρ·Σ_tσ_t),   B = L·G²·S_T/(ρ·Σ_tσ_t),   S_T = Σ_t(σ_tτ_t + σ_t²/2),
// which η* = √(A/B) = √((f(x_0) − f*)/(L·G²·S_T)) minimizes, with value 2√(AB) = 2G·√(L·(f(x_0) − f*))·√S_T/(ρ·Σσ_t).
// The ungated update (σ ≡ 1) has S_T = Σ_t(τ_t + ½) and Σσ_t = T. For a delay sequence whose empirical law is p
// (T cancels), the ratio of the two optimized bounds, gated over ungated, is
//     R(p) = √(E_p[στ] + E_p[σ²]/2) / ( E_p[σ]·√(E_p[τ] + ½) ),
// and η*_gated/η*_ungated = √((E_p[τ] + ½)/(E_p[στ] + E_p[σ²]/2)). At a constant delay τ, R = √((τ + σ/2)/(σ(τ + ½)))
// ≥ 1 for every σ ∈ (0, 1]: the gate never improves the bound there (+∞ at σ = 0, where the gated bound is
// vacuous). R < 1 needs mixed delays, where the gate discounts the stale part of the law. R is computed for the
// cosine gate (CGAD's) in certified interval arithmetic.
//
// α scan. B1, its integer version and W over α at a fixed τ_cut, with α·B1, α·W, e^α·W and e^α·B1_int, which
// show which of 1/α and e^{−α} describes each constant where.
#include "cgad/theory/interval.hpp"
#include "cgad/theory/interval_gate.hpp"

#include <optional>
#include <string>
#include <vector>

namespace cgad::theory {

// Moments of a delay law p on {0, 1, 2, …} under the cosine gate σ.
struct DelayLawMoments {
  std::string name;
  Interval mean_sigma;          // E σ(τ)
  Interval mean_sigma_tau;      // E σ(τ)·τ
  Interval mean_sigma_squared;  // E σ(τ)²
  Interval mean_tau;            // E τ; [+inf, +inf] when mean_tau_infinite
  bool mean_tau_infinite = false;
};

DelayLawMoments constant_delay_law(long tau, const IntervalGate& gate);     // τ_t = τ
DelayLawMoments uniform_delay_law(long tau_max, const IntervalGate& gate);  // uniform on {0, …, τ_max}
// 70 % fresh (τ = 0), 30 % τ = ⌊8/U⌋ with U uniform on (0, 1] (P(τ = j) = 0.3·8/(j(j+1)) for j ≥ 8, mean +∞),
// capped at `cap` (P(τ = cap) = 0.3·P(⌊8/U⌋ ≥ cap)) when given.
DelayLawMoments heavy_tail_delay_law(std::optional<long> cap, const IntervalGate& gate);

struct OptimizedEtaComparison {
  DelayLawMoments law;
  Interval gated_staleness;      // E[στ] + E[σ²]/2: the gated bound's staleness term per step
  Interval ungated_staleness;    // E[τ] + ½ (+inf when E τ is)
  Interval bound_ratio;          // R(p); [+inf, +inf] when gated_vacuous, [0, 0] when ungated_vacuous
  Interval eta_ratio;            // η*_gated/η*_ungated; meaningless when either side is vacuous
  bool gated_vacuous = false;    // E σ = 0: every delay at or past τ_cut, the gated bound is +∞
  bool ungated_vacuous = false;  // E τ = +∞: the ungated bound is +∞
};

OptimizedEtaComparison compare_optimized_eta(const DelayLawMoments& law);

// The table `cgad bound` prints: constant τ ∈ {1, 2, 4, 8, 16, 32, τ_cut − 1, τ_cut}, uniform on {0..K} for
// K ∈ {16, 64, 256}, and the heavy tail capped at 64, at 1024, and uncapped. α is enclosed from its decimal text.
std::vector<OptimizedEtaComparison> optimized_eta_table(const std::string& alpha_text, long tau_cut);

struct AlphaScanRow {
  std::string alpha;
  Interval b1;          // B1 = sup over real τ
  Interval b1_integer;  // max over τ ∈ {0..τ_cut}
  long b1_integer_argmax = 0;
  Interval w;  // Σ_{τ=1}^{τ_cut} σ(τ)
  Interval alpha_b1, alpha_w, exp_alpha_w, exp_alpha_b1_integer;
};

// α values the scan uses by default: 0.01 … 16, roughly doubling, with 0.6 and 0.7 on either side of the α
// (≈ 0.686 at τ_cut = 32) past which the integer maximizer of τσ(τ) is τ = 1.
std::vector<std::string> default_alpha_scan();
std::vector<AlphaScanRow> alpha_scan(long tau_cut, const std::vector<std::string>& alphas);

}  // namespace cgad::theory
