// The ideal gated update (theory/trajectory.hpp) and the delay schedules (theory/delays.hpp): the summed
// inequality holds at every T for random objectives, schedules, gates and seeds; the adversarial schedule
// realizes B1; the ungated bias grows with τ_max exactly as the analysis says; runs are reproducible.
#include "support/theory_trajectory_support.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "cgad/core/errors.hpp"
#include "cgad/theory/constants.hpp"
#include "cgad/theory/trajectory.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
namespace th = cgad::theory;
using cgad::theory_test::gate;
using cgad::theory_test::kDelays;
using cgad::theory_test::kGates;
using cgad::theory_test::kObjectives;
using ref::mpfr_real;

class TheoryTrajectory : public ::testing::Test {
 protected:
  // 128 bits keeps the property runs fast; the inequality's margin is many orders above 2^-128.
  void SetUp() override { ref::set_working_precision_bits(128); }
};

RC_GTEST_FIXTURE_PROP(TheoryTrajectory, SummedInequalityHoldsAtEveryT, ()) {
  th::TrajectoryConfig c;
  c.objective = *rc::gen::elementOf(kObjectives);
  c.delays = *rc::gen::elementOf(kDelays);
  c.gate = gate(*rc::gen::elementOf(kGates), "0.25", *rc::gen::inRange(1L, 41L));
  c.dimension = *rc::gen::inRange<std::size_t>(1, 5);
  c.tau_max = *rc::gen::inRange(0L, 41L);
  c.steps = 150;
  c.seed = *rc::gen::arbitrary<std::uint64_t>();
  // η from 1e-3 to 0.5: large steps make the staleness term matter, small ones the descent term.
  c.eta = mpfr_real(*rc::gen::inRange(1, 501)) / 1000;
  RC_TAG(th::to_string(c.objective), th::to_string(c.delays));
  long checked_steps = 0;
  const th::TrajectoryReport r = th::run_trajectory(c, [&](const th::TrajectoryPoint& p) {
    ++checked_steps;
    // "At every T", re-asserted here from the callback rather than trusted to the report's own flag. Slack:
    // the run's rounding, T·(4d + 16) = 150·32 < 2^13 operations of 2^-128 relative each, < 2^-115 of the
    // magnitudes involved; 2^-100·(|rhs| + 1) is above that and far below any real violation.
    RC_ASSERT(p.descent->lhs <= p.descent->rhs + ldexp(abs(p.descent->rhs) + 1, -100));
  });
  RC_ASSERT(checked_steps == c.steps);
  RC_ASSERT(!r.descent.first_violation);
  if (!r.alignment_failure) RC_ASSERT(!r.design.first_violation);
  // Deterministic objectives have a global gradient bound: never clipped, alignment ρ = 1 − s always holds.
  if (c.objective != th::ObjectiveKind::noisy_quadratic) {
    RC_ASSERT(r.clipped_steps == 0);
    RC_ASSERT(!r.alignment_failure);
  }
  RC_ASSERT(r.realized_tau_max <= c.tau_max);
}

// Each σ_tτ_t ≤ sup_τ τσ(τ), so the bias term is bounded by B1 (CGAD), 1/(eα) (Adam-Decay), τ_max
// (ungated) whatever the schedule, objective or seed.
RC_GTEST_FIXTURE_PROP(TheoryTrajectory, BiasTermIsBoundedByTheGateConstant, ()) {
  th::TrajectoryConfig c;
  c.objective = *rc::gen::elementOf(kObjectives);
  c.delays = *rc::gen::elementOf(kDelays);
  c.tau_max = *rc::gen::inRange(0L, 200L);
  c.steps = 100;
  c.dimension = 2;
  c.seed = *rc::gen::arbitrary<std::uint64_t>();
  const th::SupConstant b1 = th::certified_sup(1, th::Interval::from_decimal("0.2", "alpha"), 32);
  c.gate = gate(core::GateKind::cosine);
  RC_ASSERT(th::run_trajectory(c).bias <= b1.value.upper());
  c.gate = gate(core::GateKind::exponential);
  // Equality is possible in exact arithmetic (τ = 5 = 1/α), so allow the run's rounding: 2T operations on
  // the sum at 128 bits, ≤ 2^-119 relative; 2^-100 is comfortably above it.
  const mpfr_real inv_e_alpha = 1 / (c.gate.alpha * exp(mpfr_real(1)));
  RC_ASSERT(th::run_trajectory(c).bias <= inv_e_alpha * (1 + ldexp(mpfr_real(1), -100)));
  c.gate = gate(core::GateKind::none);
  RC_ASSERT(th::run_trajectory(c).bias <= c.tau_max);
}

// Adversarial delays: τ_t = n* = the integer argmax of τσ(τ) once t ≥ n* (τ_t = t before). The realized
// bias is then exactly (Σ_{t<n*} tσ(t) + (T − n*)·n*σ(n*))/T, and n*σ(n*) = B1_int is within the stated
// tolerance of B1: with |n − τ*| ≤ ½ for the nearer integer n and (ln h)'' ≥ −M on [τ* − ½, τ* + ½],
// Taylor's theorem at τ* (where (ln h)' = 0) gives h(n) ≥ B1·exp(−M/8), where
//   M = 1/(τ* − ½)² + (π²/(2τ_cut²))·sec²(π(τ* + ½)/(2τ_cut))      (theory/README.md §5).
TEST_F(TheoryTrajectory, AdversarialScheduleAttainsB1) {
  ref::set_working_precision_bits(256);
  for (const auto& [alpha, cut] : {std::pair<const char*, long>{"0.2", 32}, {"0.1", 64}, {"0.05", 200}, {"0.5", 16}}) {
    th::TrajectoryConfig c;
    c.delays = th::DelayKind::adversarial;
    c.gate = gate(core::GateKind::cosine, alpha, cut);
    c.tau_max = cut + 5;
    c.steps = 2000;
    c.dimension = 2;
    const th::TrajectoryReport r = th::run_trajectory(c);
    const th::SupConstant b1 = th::certified_sup(1, th::Interval::from_decimal(alpha, "alpha"), cut);
    const long n = r.adversarial_tau;
    EXPECT_EQ(n, b1.integer_argmax) << alpha;
    mpfr_real expected(0);
    for (long t = 0; t < n; ++t) expected += t * core::sigma(mpfr_real(t), c.gate);
    expected += (c.steps - n) * (n * core::sigma(mpfr_real(n), c.gate));
    expected /= c.steps;
    // The run accumulates T products and sums in 256-bit arithmetic: ≤ 2T ulps of the sum, 2^-240 relative.
    EXPECT_LE(abs(r.bias - expected), ldexp(expected, -240)) << alpha;

    const mpfr_real tau_star = b1.argmax_mpfr;
    ASSERT_GT(tau_star, 0.5);
    const mpfr_real pi = cgad::core::ScalarTraits<mpfr_real>::pi();
    const mpfr_real sec = 1 / cos(pi * (tau_star + 0.5) / (2 * cut));
    const mpfr_real M = 1 / ((tau_star - 0.5) * (tau_star - 0.5)) + pi * pi / (2 * cut * cut) * sec * sec;
    EXPECT_GE(b1.integer_value.lower(), b1.value.upper() * exp(-M / 8)) << alpha;
    EXPECT_LE(b1.integer_value.upper(), b1.value.upper()) << alpha;
    // So the adversary's long-run bias is B1 up to exp(−M/8) and the n*/T start-up: both stated tolerances.
    EXPECT_GE(r.bias, b1.value.lower() * exp(-M / 8) * (1 - mpfr_real(n) / c.steps)) << alpha;
  }
}

// Ungated, constant delays: τ_t = min(K, t), so Σσ_tτ_t/T = (K(K−1)/2 + (T−K)K)/T exactly — it grows
// linearly in τ_max = K, the τ_max term of asynchronous SGD analyses. Integers below 2^64 are exact at 128
// bits and the division rounds once on both sides, so the comparison is bit-exact.
TEST_F(TheoryTrajectory, UngatedConstantDelayBiasIsExactlyLinearInTauMax) {
  for (long K : {0L, 1L, 4L, 16L, 64L, 256L}) {
    th::TrajectoryConfig c;
    c.delays = th::DelayKind::constant;
    c.gate = gate(core::GateKind::none);
    c.tau_max = K;
    c.steps = 1000;
    c.dimension = 2;
    const th::TrajectoryReport r = th::run_trajectory(c);
    const mpfr_real expected = mpfr_real(K * (K - 1) / 2 + (c.steps - K) * K) / c.steps;
    EXPECT_EQ(r.bias, expected) << K;
  }
}

// Uniform delays on {0..K}: mean K/2, standard deviation s_K = sqrt(((K+1)² − 1)/12). The realized bias
// of T steps is within 5·s_K/√T of K/2 (5σ: a false alarm below 1e-6), minus at most K²/T for the first K
// steps where τ_t = t < K was clamped. CGAD's bias stays ≤ B1 for every K: flat, against linear growth.
TEST_F(TheoryTrajectory, UngatedUniformBiasGrowsAsKOver2AndCgadStaysFlat) {
  const th::SupConstant b1 = th::certified_sup(1, th::Interval::from_decimal("0.2", "alpha"), 32);
  double previous = -1;
  for (long K : {4L, 16L, 64L, 256L}) {
    th::TrajectoryConfig c;
    c.delays = th::DelayKind::uniform;
    c.tau_max = K;
    c.steps = 4000;
    c.dimension = 2;
    c.seed = 42 + static_cast<std::uint64_t>(K);
    c.gate = gate(core::GateKind::none);
    const double ungated = th::run_trajectory(c).bias.convert_to<double>();
    const double sd = std::sqrt(((K + 1.0) * (K + 1.0) - 1.0) / 12.0);
    const double T = static_cast<double>(c.steps);
    EXPECT_LE(ungated, K / 2.0 + 5 * sd / std::sqrt(T)) << K;
    EXPECT_GE(ungated, K / 2.0 - 5 * sd / std::sqrt(T) - K * static_cast<double>(K) / T) << K;
    EXPECT_GT(ungated, previous);
    previous = ungated;
    c.gate = gate(core::GateKind::cosine);
    EXPECT_LE(th::run_trajectory(c).bias, b1.value.upper()) << K;
  }
}

// Constant delay from the start: the first K steps are idle (no update, σ_t = τ_t = 0), then every arrival is
// exactly K old, so the ungated bias is exactly (T − K)·K/T — against (K(K−1)/2 + (T−K)K)/T with the start-up
// τ_t = min(K, t) of `constant`.
TEST_F(TheoryTrajectory, ConstantFromStartIdlesThenIsExactlyK) {
  for (long K : {0L, 1L, 7L, 64L}) {
    th::TrajectoryConfig c;
    c.delays = th::DelayKind::constant_from_start;
    c.gate = gate(core::GateKind::none);
    c.tau_max = K;
    c.steps = 500;
    c.dimension = 2;
    std::vector<mpfr_real> f;
    const th::TrajectoryReport r = th::run_trajectory(c, [&](const th::TrajectoryPoint& p) {
      f.push_back(p.f);
      if (p.T <= K) EXPECT_EQ(p.sigma, 0);
      if (p.T > K) EXPECT_EQ(p.tau, K);
    });
    EXPECT_EQ(r.idle_steps, K);
    EXPECT_EQ(r.bias, mpfr_real((c.steps - K) * K) / c.steps) << K;
    for (long t = 0; t < K; ++t) EXPECT_EQ(f[static_cast<std::size_t>(t)], r.f0);  // nothing moved
    EXPECT_FALSE(r.descent.first_violation);
    EXPECT_FALSE(r.realized.first_violation);
  }
}

TEST_F(TheoryTrajectory, RunsAreReproducibleFromTheSeed) {
  th::TrajectoryConfig c;
  c.objective = th::ObjectiveKind::noisy_quadratic;
  c.delays = th::DelayKind::pareto;
  c.steps = 300;
  c.seed = 12345;
  const th::TrajectoryReport a = th::run_trajectory(c);
  const th::TrajectoryReport b = th::run_trajectory(c);
  EXPECT_EQ(a.bias, b.bias);
  EXPECT_EQ(a.f_final, b.f_final);
  EXPECT_EQ(a.descent.lhs, b.descent.lhs);
  c.seed = 12346;
  EXPECT_NE(th::run_trajectory(c).f_final, a.f_final);
}

// Schedules: every delay in [0, τ_max]; constant and adversarial are what they say; the Pareto tail obeys
// P(τ ≥ j) = (j+1)^{−1.2} (checked at j = 1 and 7, 5σ binomial tolerance over 20000 draws); the geometric
// mean is (1−p)/p = τ_max/4 before capping; bursts of τ_max happen at about 8/(20 + 8) of the time.
TEST_F(TheoryTrajectory, DelaySchedulesHaveTheirStatedLaws) {
  constexpr long K = 1000;
  constexpr int N = 20000;
  for (auto kind : kDelays) {
    th::DelaySchedule schedule(kind, K, 9, 17);
    long at_least_1 = 0, at_least_7 = 0, at_least_8 = 0, at_least_16 = 0, at_max = 0;
    double sum = 0;
    for (int i = 0; i < N; ++i) {
      const long tau = schedule.next();
      ASSERT_GE(tau, 0);
      ASSERT_LE(tau, K);
      if (kind == th::DelayKind::constant || kind == th::DelayKind::constant_from_start) {
        ASSERT_EQ(tau, K);
      }
      if (kind == th::DelayKind::adversarial) {
        ASSERT_EQ(tau, 17);
      }
      at_least_1 += tau >= 1;
      at_least_7 += tau >= 7;
      at_least_8 += tau >= 8;
      at_least_16 += tau >= 16;
      at_max += tau == K;
      sum += static_cast<double>(tau);
    }
    auto near = [&](long count, double p) { return std::abs(count - N * p) <= 5 * std::sqrt(N * p * (1 - p)); };
    if (kind == th::DelayKind::pareto) {
      EXPECT_TRUE(near(at_least_1, std::pow(2.0, -1.2))) << at_least_1;
      EXPECT_TRUE(near(at_least_7, std::pow(8.0, -1.2))) << at_least_7;
    }
    if (kind == th::DelayKind::heavy_tail) {
      // 30 % stale with P(⌊8/U⌋ ≥ j) = 8/j for j ≥ 8: P(τ ≥ 1) = P(τ ≥ 8) = 0.3, P(τ ≥ 16) = 0.15,
      // P(τ = K) = 0.3·8/K (the cap).
      EXPECT_EQ(at_least_1, at_least_8);
      EXPECT_TRUE(near(at_least_8, 0.3)) << at_least_8;
      EXPECT_TRUE(near(at_least_16, 0.15)) << at_least_16;
      EXPECT_TRUE(near(at_max, 0.3 * 8.0 / K)) << at_max;
    }
    if (kind == th::DelayKind::geometric) {
      // Geometric mean 250, standard deviation sqrt(1−p)/p ≈ 250; capping at K = 4·mean cuts e^{-4}·250 ≈ 5.
      EXPECT_NEAR(sum / N, 250.0, 5 * 250.0 / std::sqrt(N) + 5.0);
    }
    if (kind == th::DelayKind::bursty) {
      // Stationary share of burst steps: 8 burst steps per (1/p = 20 expected calm steps + 8): 0.2857;
      // bursts are correlated, so allow 5σ of N/8 independent bursts.
      const double share = 8.0 / 28.0;
      EXPECT_NEAR(static_cast<double>(at_max) / N, share, 5 * std::sqrt(share * (1 - share) / (N / 8.0)));
    }
  }
}

TEST_F(TheoryTrajectory, BadInputIsRefused) {
  auto run = [](auto mutate) {
    th::TrajectoryConfig c;
    mutate(c);
    return th::run_trajectory(c);
  };
  EXPECT_THROW(run([](auto& c) { c.steps = 0; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.tau_max = -1; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.tau_max = th::kMaxTrajectoryTauMax + 1; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.eta = 0; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.eta = mpfr_real("nan"); }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.noise = 1.0; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.noise = -0.1; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.dimension = 0; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.gate.alpha = -1; }), core::InputError);
  EXPECT_THROW(run([](auto& c) { c.gate.tau_cut = 0; }), core::InputError);
  EXPECT_THROW(th::parse_delay_kind("poisson"), core::InputError);
  EXPECT_EQ(th::parse_delay_kind("heavy-tail"), th::DelayKind::heavy_tail);
  EXPECT_EQ(th::parse_delay_kind("constant-from-start"), th::DelayKind::constant_from_start);
}

}  // namespace
