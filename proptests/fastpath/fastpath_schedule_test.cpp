// The step schedule both backends run (step_schedule.hpp): the double-double power against MPFR, the bias
// corrections it gives against those std::pow gave before it, and PA-CGAD's table of σ over ages against the
// reference's gate.
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/detail/staleness.hpp"
#include "cgad/fastpath/detail/step_schedule.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"

#include <gtest/gtest.h>
#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace cgad::fastpath {
namespace {

std::string hex(double x) {
  char text[40];
  std::snprintf(text, sizeof text, "%a", x);
  return text;
}

// β^t at 256 bits (MPFR's pow_ui is correctly rounded there), then rounded to double; `near_midpoint` when the
// 256-bit value lies within t·2^-100 (relative) of a midpoint between doubles, where the double-double value might
// round the other way: each double-double product errs by about 2^-104 relative, and a squaring doubles the
// relative error it is given, so the errors of binary powering add up to about t·2^-104.
double mpfr_power(double base, std::uint64_t t, bool& near_midpoint) {
  mpfr_t exact, midpoint;
  mpfr_inits2(256, exact, midpoint, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_d(exact, base, MPFR_RNDN);
  mpfr_pow_ui(exact, exact, t, MPFR_RNDN);
  const double nearest = mpfr_get_d(exact, MPFR_RNDN);
  const double down = mpfr_get_d(exact, MPFR_RNDD), up = mpfr_get_d(exact, MPFR_RNDU);
  near_midpoint = false;
  if (down != up && nearest > 0) {
    mpfr_set_d(midpoint, down, MPFR_RNDN);
    mpfr_add_d(midpoint, midpoint, up, MPFR_RNDN);
    mpfr_div_2ui(midpoint, midpoint, 1, MPFR_RNDN);  // exact at 256 bits
    mpfr_sub(midpoint, midpoint, exact, MPFR_RNDN);
    mpfr_div(midpoint, midpoint, exact, MPFR_RNDN);
    mpfr_abs(midpoint, midpoint, MPFR_RNDN);
    near_midpoint = mpfr_cmp_ui_2exp(midpoint, t == 0 ? 1 : t, -100) < 0;
  }
  mpfr_clears(exact, midpoint, static_cast<mpfr_ptr>(nullptr));
  return nearest;
}

// Float β (the configuration's) and t up to 2^40 (β^t is 0 in double for every float β < 1 past t ≈ 2^34): the
// power is the correctly rounded double of β^t wherever β^t ≥ 2^-900 (the double-double's low half is then
// normal) and the exact value is not within t·2^-100 of a midpoint; below 2^-900 its float is the exact value's.
TEST(FastpathSchedule, DoubleDoublePowerIsCorrectlyRoundedAgainstMpfr) {
  for (const std::uint64_t seed : {20261201u, 7u}) {
    std::mt19937_64 random(seed);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    int checked = 0, near_midpoints = 0, near_but_equal = 0, tiny = 0;
    for (int i = 0; i < 200000; ++i) {
      float beta;
      switch (i % 4) {
        case 0:
          beta = uniform(random);
          break;
        case 1:
          beta = 1.0f - std::ldexp(1.0f, -static_cast<int>(1 + random() % 24));
          break;  // 1 − 2^-k
        case 2:
          beta = std::nextafter(1.0f, 0.0f) - static_cast<float>(random() % 64) * 0x1p-24f;
          break;
        default:
          beta = std::vector<float>{0.0f, 0.5f, 0.9f, 0.95f, 0.99f, 0.999f, 0.9999f}[random() % 7];
          break;
      }
      const int magnitude = static_cast<int>(random() % 41);
      const std::uint64_t t = random() % (std::uint64_t{1} << magnitude) + (i % 3 == 0 ? 0 : 1);
      bool near_midpoint = false;
      const double want = mpfr_power(beta, t, near_midpoint);
      const double got = exact_power(beta, 0.0, t);
      if (want < 0x1p-900) {
        ++tiny;
        ASSERT_EQ(static_cast<float>(got), static_cast<float>(want)) << "beta " << hex(beta) << " t " << t;
        continue;
      }
      if (near_midpoint) {
        ++near_midpoints;
        near_but_equal += got == want;
        continue;
      }
      ++checked;
      ASSERT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(want))
          << "beta " << hex(beta) << " t " << t << ": " << hex(got) << " vs MPFR " << hex(want);
    }
    std::printf("seed %llu: correctly rounded %d; float-equal below 2^-900 %d; near a midpoint %d (%d equal anyway)\n",
                static_cast<unsigned long long>(seed), checked, tiny, near_midpoints, near_but_equal);
    EXPECT_GT(checked, 90000);
    EXPECT_LT(near_midpoints, 100);
  }
}

// The floats the step uses, 1 − RN_f(β^t) and RN_f(1 − β^t), are the ones std::pow gave (the planner's code before
// the schedule moved to the device) for every t ≤ 2^16 (ci; 2^24 in the long test, ~40 s) and ten β.
#if defined(CGAD_SCHEDULE_LONG)
constexpr std::int64_t kLastStep = std::int64_t{1} << 24;
#else
constexpr std::int64_t kLastStep = std::int64_t{1} << 16;
#endif
TEST(FastpathSchedule, BiasCorrectionsAreThoseOfStdPow) {
  for (const float beta : {0.0f, 0.5f, 0.9f, 0.95f, 0.99f, 0.995f, 0.999f, 0.9999f, 0.99999f, 0.999999f}) {
    for (std::int64_t t = 1; t <= kLastStep; ++t) {
      const double before = std::pow(static_cast<double>(beta), static_cast<double>(t));
      const double now = exact_power(beta, 0.0, static_cast<std::uint64_t>(t));
      ASSERT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(1.0 - now)),
                std::bit_cast<std::uint32_t>(static_cast<float>(1.0 - before)))
          << "beta " << beta << " t " << t;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(1.0f - static_cast<float>(now)),
                std::bit_cast<std::uint32_t>(1.0f - static_cast<float>(before)))
          << "beta " << beta << " t " << t;
    }
  }
}

StepConfig pa_cgad(double tau_cut, core::ZeroGatePolicy policy) {
  StepConfig config;
  config.optimizer = core::OptimizerKind::pa_cgad;
  config.fragments = 2;
  config.tau_cut = tau_cut;
  config.on_zero_gate = policy;
  return config;
}

// A fragment left unsynchronized for a rounds is gated by σ(max(τ, a)), the float staleness.hpp computes (which
// fastpath_sigma_rounding_test checks against MPFR), skipped (policy skip) exactly where γ(a) = 0, and synchronized by
// a zero-gate skip but not by a refusal.
TEST(FastpathSchedule, AgesAreGatedAsTheReferenceGates) {
  for (const float tau_cut : {2.5f, 8.0f, 7.0001f, 32.0f}) {
    for (const auto policy : {core::ZeroGatePolicy::apply, core::ZeroGatePolicy::skip}) {
      StepPlanner planner(pa_cgad(tau_cut, policy), 64);
      const auto gate = long_double_gate(planner.config());
      for (std::int64_t age = 0; age < 3 * static_cast<std::int64_t>(tau_cut) + 3; ++age) {
        for (const std::int64_t tau : {std::int64_t{0}, age / 2, age + 1}) {
          StepPlanner::Counters counters = planner.raw_counters();
          counters.round = age + 1;
          counters.last_sync = {0, 0};  // age = round − last_sync − 1
          counters.t = {5, 5};
          planner.set_raw_counters(counters);
          ASSERT_EQ(planner.age(1), age);
          const StepPlanner::Plan plan = planner.plan(64, 32, tau, 1);
          const std::int64_t seen = std::max(tau, age);
          const std::string where =
              "tau_cut " + std::to_string(tau_cut) + " age " + std::to_string(age) + " tau " + std::to_string(tau);
          EXPECT_EQ(plan.scheduled.tau_effective, seen) << where;
          EXPECT_EQ(std::bit_cast<std::uint32_t>(plan.scheduled.sigma),
                    std::bit_cast<std::uint32_t>(gate_sigma(gate, seen)))
              << where;
          const bool zero = static_cast<double>(seen) >= static_cast<double>(tau_cut);  // γ = 0 exactly there
          EXPECT_EQ(plan.scheduled.applied, !(zero && policy == core::ZeroGatePolicy::skip)) << where;
          if (plan.scheduled.applied) {
            EXPECT_EQ(std::bit_cast<std::uint32_t>(plan.scheduled.adam.bias2),
                      std::bit_cast<std::uint32_t>(adam_coefficients(planner.schedule_constants(), 0.0f, 6).bias2));
          }
          StepPlanner refused = planner;
          refused.commit(plan, StepOutcome::nonfinite);
          EXPECT_EQ(refused.age(1), age) << where << ": a refusal synchronized the fragment";
          refused.commit(plan, plan.scheduled.applied ? StepOutcome::applied : StepOutcome::zero_gate);
          EXPECT_EQ(refused.age(1), 0) << where;
          EXPECT_EQ(refused.raw_counters().t[1], plan.scheduled.applied ? 6 : 5) << where;
        }
      }
    }
  }
}

// A state file's counters of 2^62 or more are refused: t + 1 must not overflow (nor the power loop spin on a
// negative exponent).
TEST(FastpathSchedule, CountersThatCouldOverflowAreRefused) {
  StepPlanner planner(StepConfig{}, 8);
  const StepPlanner::Counters good = planner.raw_counters();
  constexpr std::int64_t limit = std::int64_t{1} << 62;
  StepPlanner::Counters c = good;
  c.t = {limit - 1};
  EXPECT_NO_THROW(planner.set_raw_counters(c));
  EXPECT_EQ(planner.plan(8, 8, 0, 0).scheduled.applied, true);
  c.t = {limit};
  EXPECT_THROW(planner.set_raw_counters(c), core::InputError);
  c = good;
  c.round = limit;
  EXPECT_THROW(planner.set_raw_counters(c), core::InputError);
  c = good;
  c.steps = static_cast<std::uint64_t>(limit);
  EXPECT_THROW(planner.set_raw_counters(c), core::InputError);
}

TEST(FastpathSchedule, PaCgadTauCutIsBoundedByTheAgeTable) {
  EXPECT_NO_THROW(validate(pa_cgad(kMaxPaCgadTauCut, core::ZeroGatePolicy::apply)));
  EXPECT_THROW(validate(pa_cgad(std::nextafter(kMaxPaCgadTauCut, 2 * kMaxPaCgadTauCut), core::ZeroGatePolicy::apply)),
               core::InputError);
  const StepPlanner planner(pa_cgad(100.5, core::ZeroGatePolicy::apply), 8);
  EXPECT_EQ(planner.age_sigma().size(), 101u);  // ages 0..100 lie below τ_cut
}

}  // namespace
}  // namespace cgad::fastpath
