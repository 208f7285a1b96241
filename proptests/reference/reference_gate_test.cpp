// Properties of the staleness gate γ, σ (docs/design.md §3), at 256-bit MPFR and in double.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "cgad/core/gate.hpp"
#include "cgad/reference/real.hpp"

#include <cmath>

namespace {

using cgad::core::GateKind;
using cgad::core::GateParams;
using cgad::reference::mpfr_real;
namespace ref = cgad::reference;
namespace core = cgad::core;

class GateTest : public ::testing::Test {
 protected:
  void SetUp() override { ref::set_working_precision_bits(256); }
};

// α on a decimal grid in [0, 2] and τ_cut in [1, 200]: the ranges the paper and cgad's defaults live in.
GateParams<mpfr_real> gate_from(int alpha_thousandths, int tau_cut) {
  return {GateKind::cosine, mpfr_real(alpha_thousandths) / 1000, mpfr_real(tau_cut)};
}

RC_GTEST_FIXTURE_PROP(GateTest, SigmaIsOneAtZeroAndZeroAtAndPastCutoff, ()) {
  const int alpha = *rc::gen::inRange(0, 2001);
  const int cut = *rc::gen::inRange(1, 201);
  const auto gate = gate_from(alpha, cut);
  RC_ASSERT(core::sigma(mpfr_real(0), gate) == 1);
  RC_ASSERT(core::gamma(mpfr_real(0), gate) == 1);
  const int past = *rc::gen::inRange(0, 1000);
  RC_ASSERT(core::sigma(mpfr_real(cut + past), gate) == 0);
  RC_ASSERT(core::gamma(mpfr_real(cut + past), gate) == 0);
  // Real-valued τ just past the cutoff is exactly zero too.
  RC_ASSERT(core::sigma(mpfr_real(mpfr_real(cut) + mpfr_real(1) / (1 + past)), gate) == 0);
}

RC_GTEST_FIXTURE_PROP(GateTest, SigmaIsInUnitIntervalAndNonIncreasingOverIntegers, ()) {
  const auto gate = gate_from(*rc::gen::inRange(0, 2001), *rc::gen::inRange(1, 201));
  mpfr_real previous(1);
  for (int tau = 0; tau <= gate.tau_cut.convert_to<int>() + 1; ++tau) {
    const mpfr_real s = core::sigma(mpfr_real(tau), gate);
    RC_ASSERT(s >= 0);
    RC_ASSERT(s <= previous);
    previous = s;
  }
}

// Monotone on the reals too: every operation behind σ is correctly rounded and monotone on its range, so the
// computed σ is non-increasing exactly, not just up to rounding.
RC_GTEST_FIXTURE_PROP(GateTest, SigmaIsNonIncreasingOverReals, ()) {
  const auto gate = gate_from(*rc::gen::inRange(0, 2001), *rc::gen::inRange(1, 201));
  const mpfr_real a = gate.tau_cut * *rc::gen::inRange(0, 1'000'001) / 1'000'000;
  const mpfr_real b = gate.tau_cut * *rc::gen::inRange(0, 1'000'001) / 1'000'000;
  const mpfr_real lo = a < b ? a : b;
  const mpfr_real hi = a < b ? b : a;
  RC_ASSERT(core::sigma(hi, gate) <= core::sigma(lo, gate));
  RC_ASSERT(core::gamma(hi, gate) <= core::gamma(lo, gate));
}

// The implementation uses sin²(π(τ_cut−τ)/(2τ_cut)); the contract is ½(1+cos(πτ/τ_cut)). Evaluate the contract
// at 512 bits independently: the two must agree to a few units of 2^-256 in absolute terms (cos at 512 bits
// cancels at most ~2^-512 away, and each 256-bit operation in the sine form adds ≤ 2^-257 relative).
RC_GTEST_FIXTURE_PROP(GateTest, GammaMatchesTheCosineDefinition, ()) {
  const int cut = *rc::gen::inRange(1, 201);
  const int tau = *rc::gen::inRange(0, cut + 1);
  const mpfr_real ours = core::gamma(mpfr_real(tau), gate_from(200, cut));
  ref::set_working_precision_bits(512);
  const mpfr_real theta = cgad::core::ScalarTraits<mpfr_real>::pi() * tau / cut;
  const mpfr_real contract = (1 + cos(theta)) / 2;
  const mpfr_real ours_wide(ours);
  const mpfr_real error = abs(ours_wide - contract);
  ref::set_working_precision_bits(256);
  RC_ASSERT(error <= ldexp(mpfr_real(8), -256));
}

// Continuity at τ_cut: γ(τ_cut − h) = sin²(πh/(2τ_cut)) ≤ (πh/(2τ_cut))², so σ → 0 as h → 0.
RC_GTEST_FIXTURE_PROP(GateTest, SigmaIsContinuousAtTheCutoff, ()) {
  const auto gate = gate_from(*rc::gen::inRange(0, 2001), *rc::gen::inRange(1, 201));
  const int k = *rc::gen::inRange(1, 200);
  const mpfr_real h = ldexp(mpfr_real(1), -k);
  const mpfr_real s = core::sigma(mpfr_real(gate.tau_cut - h), gate);
  const mpfr_real bound =
      pow(cgad::core::ScalarTraits<mpfr_real>::pi() * h / (2 * gate.tau_cut), 2) * (1 + ldexp(mpfr_real(1), -200));
  RC_ASSERT(s > 0);
  RC_ASSERT(s <= bound);
}

TEST_F(GateTest, HalfwayGammaIsOneHalf) {
  // γ(τ_cut/2) = ½(1 + cos(π/2)) = ½; the sine form gives sin²(π/4) = ½ up to 2 roundings of 2^-257.
  const auto gate = gate_from(200, 32);
  const mpfr_real g = core::gamma(mpfr_real(16), gate);
  EXPECT_LE(abs(g - mpfr_real(1) / 2), ldexp(mpfr_real(1), -255));
}

TEST_F(GateTest, ExponentialAndNoneKinds) {
  GateParams<mpfr_real> decay{GateKind::exponential, mpfr_real(1) / 5, mpfr_real(32)};
  EXPECT_EQ(core::sigma(mpfr_real(100), decay), exp(mpfr_real(-20)));
  GateParams<mpfr_real> none{GateKind::none, mpfr_real(1) / 5, mpfr_real(32)};
  EXPECT_EQ(core::sigma(mpfr_real(100), none), 1);
}

TEST_F(GateTest, RefusesBadParameters) {
  EXPECT_THROW(core::validate(gate_from(-1, 32)), core::InputError);
  EXPECT_THROW(core::validate(GateParams<mpfr_real>{GateKind::cosine, mpfr_real(0), mpfr_real(0)}), core::InputError);
  EXPECT_THROW(core::validate(GateParams<mpfr_real>{GateKind::cosine, mpfr_real(0), mpfr_real(-3)}), core::InputError);
  const mpfr_real nan = std::numeric_limits<mpfr_real>::quiet_NaN();
  EXPECT_THROW(core::validate(GateParams<mpfr_real>{GateKind::cosine, nan, mpfr_real(32)}), core::InputError);
  EXPECT_THROW(core::sigma(mpfr_real(-1), gate_from(200, 32)), core::InputError);
  EXPECT_THROW(core::sigma(nan, gate_from(200, 32)), core::InputError);
  EXPECT_THROW(core::sigma(std::numeric_limits<double>::infinity(), GateParams<double>{GateKind::cosine, 0.2, 32.0}),
               core::InputError);
}

// The double rung: σ in double is within a few ulps of the 256-bit value (sin, exp each ≤ 1 ulp in glibc,
// plus 4 roundings of products/quotients): 8 ulps of 2^-53 relative.
TEST_F(GateTest, DoubleRungAgreesWithMpfr) {
  for (int tau = 0; tau <= 33; ++tau) {
    const double d = core::sigma(double(tau), GateParams<double>{GateKind::cosine, 0.2, 32.0});
    // Against the MPFR σ for the α the double actually holds (0.2 is not a double).
    const mpfr_real m =
        core::sigma(mpfr_real(tau), GateParams<mpfr_real>{GateKind::cosine, mpfr_real(0.2), mpfr_real(32)});
    if (m == 0) {
      EXPECT_EQ(d, 0.0) << tau;
      continue;
    }
    EXPECT_LE(abs((mpfr_real(d) - m) / m), ldexp(mpfr_real(8), -53))
        << "tau " << tau << " double " << std::hexfloat << d;
  }
}

}  // namespace
