// The seed statistics (simulate/seed_statistics.hpp) on cases whose answer is known without the code: bootstrap
// intervals of two and three values, where every resample can be enumerated by hand; the asymptotic width of the
// σ interval for a large normal sample; permutation p-values that follow from counting splits; and the test's
// size and power on samples drawn under the null and under a σ ratio of 3.
#include "cgad/reference/random.hpp"
#include "cgad/simulate/seed_statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

using namespace cgad::simulate;

std::vector<double> normals(std::size_t n, double mean, double sigma, std::uint64_t seed) {
  cgad::reference::PhiloxStream stream(seed, cgad::reference::StreamPurpose::noise_events);
  std::vector<double> x(n);
  for (double& v : x) v = mean + sigma * stream.normal();
  return x;
}

// {1, 3}: a resample is {1,1} or {3,3} (probability 1/4 each: σ 0, risk 1 or 3) or a mixed pair (1/2: mean 2,
// σ √2, risk 2 + √2). The 2.5 % point is the smallest value, the 97.5 % point the largest.
TEST(SimulateStatistics, BootstrapOfTwoValuesIsItsExtremes) {
  const std::vector<double> x{1.0, 3.0};
  const SpreadIntervals ci = bootstrap_spread(x);
  EXPECT_EQ(ci.mean.low, 1.0);
  EXPECT_EQ(ci.mean.high, 3.0);
  EXPECT_EQ(ci.sigma.low, 0.0);
  EXPECT_DOUBLE_EQ(ci.sigma.high, std::sqrt(2.0));
  EXPECT_EQ(ci.risk.low, 1.0);
  EXPECT_DOUBLE_EQ(ci.risk.high, 2.0 + std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(sample_sigma(x), std::sqrt(2.0));
}

// {0, 0, 1}: the number of 1s in a resample is Binomial(3, 1/3): 0 or 3 (probability 9/27) give σ 0, 1 or 2
// (18/27) give σ = √(1/3). The risk is 0 (8/27), 1/3 + √(1/3) (12/27), 1 (1/27) or 2/3 + √(1/3) (6/27): its
// CDF passes 2.5 % at 0 and reaches 97.5 % only at the largest value. The mean is 0, 1/3, 2/3 or 1 with CDF
// 8/27, 20/27, 26/27 (0.963 < 0.975), 1: its interval is [0, 1].
TEST(SimulateStatistics, BootstrapOfThreeValuesFollowsTheBinomialCount) {
  const std::vector<double> x{0.0, 0.0, 1.0};
  const SpreadIntervals ci = bootstrap_spread(x);
  EXPECT_EQ(ci.sigma.low, 0.0);
  EXPECT_NEAR(ci.sigma.high, std::sqrt(1.0 / 3.0), 1e-15);
  EXPECT_EQ(ci.risk.low, 0.0);
  EXPECT_NEAR(ci.risk.high, 2.0 / 3.0 + std::sqrt(1.0 / 3.0), 1e-15);
  EXPECT_EQ(ci.mean.low, 0.0);
  EXPECT_EQ(ci.mean.high, 1.0);
  // Reproducible: the resampling seed is fixed.
  const SpreadIntervals again = bootstrap_spread(x);
  EXPECT_EQ(again.risk.high, ci.risk.high);
}

// For normal data the sample σ is asymptotically normal with standard error σ/√(2(n − 1)) and the mean with
// σ/√n, so the 95 % intervals are about 2·1.96 times those wide.
TEST(SimulateStatistics, LargeNormalSampleIntervalsHaveTheAsymptoticWidth) {
  constexpr std::size_t n = 2000;
  const std::vector<double> x = normals(n, 5.0, 2.0, 11);
  const SpreadIntervals ci = bootstrap_spread(x);
  const double sigma_width = 2 * 1.96 * 2.0 / std::sqrt(2.0 * (n - 1));
  const double mean_width = 2 * 1.96 * 2.0 / std::sqrt(static_cast<double>(n));
  EXPECT_NEAR(ci.sigma.high - ci.sigma.low, sigma_width, 0.15 * sigma_width);
  EXPECT_NEAR(ci.mean.high - ci.mean.low, mean_width, 0.15 * mean_width);
  EXPECT_LT(ci.sigma.low, 2.0);
  EXPECT_GT(ci.sigma.high, 2.0);
}

// a = {0, 2}, b = {10, 10.2}: centred, the pool is {−1, 1, −0.1, 0.1}. Of its 6 splits into two pairs, the
// observed one and its mirror give |ln σ_a − ln σ_b| = ln 10; {−1, −0.1 | 1, 0.1} and {−1, 0.1 | 1, −0.1} give
// equal σ (0): p = 2/6 exactly.
TEST(SimulateStatistics, PermutationTestOfTwoPairsCountsTheSplits) {
  const SigmaComparison t = compare_sigma(std::vector<double>{0.0, 2.0}, std::vector<double>{10.0, 10.2});
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.splits, 6u);
  EXPECT_DOUBLE_EQ(t.p_value, 1.0 / 3.0);
  EXPECT_NEAR(t.ratio, 10.0, 1e-12);
}

// b = 10^6·a (n = 8 each): only the observed split and its mirror put all large residuals on one side, so
// p = 2 / C(16, 8) = 2/12870; the ratio is 10^-6 and its bootstrap interval holds it.
TEST(SimulateStatistics, AScaledCopyIsAsExtremeOnlyAsItsMirror) {
  const std::vector<double> a = normals(8, 0.0, 1.0, 3);
  std::vector<double> b;
  for (const double v : a) b.push_back(1e6 * v + 7.0);
  const SigmaComparison t = compare_sigma(a, b);
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.splits, 12870u);
  EXPECT_DOUBLE_EQ(t.p_value, 2.0 / 12870.0);
  EXPECT_NEAR(t.ratio, 1e-6, 1e-12);
  EXPECT_LE(t.ratio_ci.low, t.ratio);
  EXPECT_GE(t.ratio_ci.high, t.ratio);
  // The same sample against itself: ratio 1, nothing more extreme than equal σ, p = 1.
  const SigmaComparison same = compare_sigma(a, a);
  EXPECT_EQ(same.ratio, 1.0);
  EXPECT_EQ(same.p_value, 1.0);
  // Past kPermutations splits (C(32, 16) ≈ 6·10^8) the splits are drawn: p = (1 + k)/(1 + B) ≥ 1/(1 + B).
  const std::vector<double> big_a = normals(16, 0.0, 1.0, 4);
  std::vector<double> big_b;
  for (const double v : big_a) big_b.push_back(1e6 * v);
  const SigmaComparison drawn = compare_sigma(big_a, big_b);
  EXPECT_FALSE(drawn.exact);
  EXPECT_EQ(drawn.splits, kPermutations);
  EXPECT_DOUBLE_EQ(drawn.p_value, 1.0 / (1.0 + kPermutations));
}

// Size and power, n = 8 per cell as in a small sweep: under the null (equal σ, means 5 apart, which centring
// removes) the share of p < 0.05 over 300 independent pairs is at most 0.05 plus 4 binomial standard deviations;
// with σ_b = 3σ_a the F test's power is 0.77 (P(F(7,7) > 4.99/9)) and this test's at least half of that.
TEST(SimulateStatistics, ThePermutationTestHoldsItsSizeAndHasPower) {
  constexpr int kPairs = 300;
  int null_rejections = 0, rejections = 0;
  for (int i = 0; i < kPairs; ++i) {
    const std::vector<double> a = normals(8, 0.0, 1.0, 1000 + 2 * i);
    null_rejections += compare_sigma(a, normals(8, 5.0, 1.0, 1001 + 2 * i), 10).p_value < 0.05;
    rejections += compare_sigma(a, normals(8, 0.0, 3.0, 1001 + 2 * i), 10).p_value < 0.05;
  }
  EXPECT_LE(null_rejections, static_cast<int>(kPairs * (0.05 + 4 * std::sqrt(0.05 * 0.95 / kPairs))));
  EXPECT_GE(rejections, kPairs * 0.77 / 2);
  RecordProperty("null_rejections", null_rejections);
  RecordProperty("rejections_at_ratio_3", rejections);
}

}  // namespace
