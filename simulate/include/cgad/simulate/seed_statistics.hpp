#pragma once
// How uncertain a cell's seed-to-seed σ is, and when two cells' σ differ beyond seed noise. With 5–16
// seeds a sample σ is uncertain by a factor of about [0.66, 2] (n = 8, normal data: the χ² interval), so "σ
// grows" needs an interval and a test, not two numbers.
//
// Intervals: the percentile bootstrap (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13): B
// resamples of the n final losses with replacement, each statistic recomputed, the 2.5 % and 97.5 % points of
// their empirical distribution — the order statistics ⌈0.025·B⌉ and ⌈0.975·B⌉ (1-based), i.e. the inverse of
// the empirical CDF. Resampling is keyed by a fixed seed (kBootstrapSeed), so every interval is reproducible, and
// the same resampling pattern serves every cell of the same n. Percentile intervals for σ are known to be too
// narrow for small n (they cannot reach past the largest resampled σ); they are reported as what they are.
//
// The test of "σ_a ≠ σ_b": a permutation test of the log σ ratio on mean-centred values (Good, "Permutation,
// Parametric and Bootstrap Tests of Hypotheses", 3rd ed., 2005, §3.7.2; Boos & Brownie, Technometrics 31, 1989,
// on resampling pooled centred values to compare variances). Each cell's values minus its own mean are pooled;
// the statistic is |ln s(A) − ln s(B)| over every split of the pool into groups of the cells' sizes (exact when
// there are at most kPermutations splits, else kPermutations random splits with p = (1 + k)/(1 + B), Phipson &
// Smyth 2010), and p is the share of splits at least as extreme as the observed one. Centred values are only
// asymptotically exchangeable, so the test's size is approximate for small n (proptests/
// simulate_statistics_test.cpp measures it). Beside p: the ratio s_a/s_b and its percentile-bootstrap 95 %
// interval (the two cells resampled independently). The docs say "beyond seed noise" when p < 0.05.
#include <cstddef>
#include <cstdint>
#include <span>

namespace cgad::simulate {

inline constexpr std::uint64_t kBootstrapSeed = 20260515;
inline constexpr std::size_t kBootstrapResamples = 2000;
inline constexpr std::size_t kPermutations = 20000;

struct Interval {
  double low = 0, high = 0;
};

// The sample standard deviation (n − 1 in the denominator) of x, two passes; needs n ≥ 2.
double sample_sigma(std::span<const double> x);

// Percentile-bootstrap 95 % intervals of the mean, the sample σ and the single-shot risk mean + σ; needs n ≥ 2.
struct SpreadIntervals {
  Interval mean, sigma, risk;
};
SpreadIntervals bootstrap_spread(std::span<const double> x, std::size_t resamples = kBootstrapResamples,
                                 std::uint64_t seed = kBootstrapSeed);

struct SigmaComparison {
  double ratio = 1;        // s_a / s_b (1 when both are 0; +inf when only s_b is)
  Interval ratio_ci;       // percentile bootstrap, 95 %
  double p_value = 1;      // two-sided permutation p of |ln s_a − ln s_b|
  bool exact = false;      // every split enumerated
  std::size_t splits = 0;  // splits evaluated
};
// Needs both samples of size ≥ 2.
SigmaComparison compare_sigma(std::span<const double> a, std::span<const double> b,
                              std::size_t resamples = kBootstrapResamples, std::size_t permutations = kPermutations,
                              std::uint64_t seed = kBootstrapSeed);

}  // namespace cgad::simulate
