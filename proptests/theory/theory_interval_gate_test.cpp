// The interval gate (theory/interval_gate.hpp) against the one MPFR gate (core::sigma): the MPFI
// enclosure of σ(τ) at 257 bits must contain σ(τ) evaluated by core::sigma at 600 bits.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "support/theory_test_support.hpp"

#include "cgad/theory/interval_gate.hpp"

#include <string>

namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
namespace th = cgad::theory;
using cgad::theory_test::kIndependentBits;
using cgad::theory_test::nudge;
using cgad::theory_test::PrecisionScope;
using ref::mpfr_real;

class TheoryIntervalGate : public ::testing::Test {
 protected:
  void SetUp() override { ref::set_working_precision_bits(256); }
};

// τ = τ_cut·j/2^20 (exact in every precision used) or an integer; α = n/1000.
RC_GTEST_FIXTURE_PROP(TheoryIntervalGate, EnclosureContainsReferenceSigma, ()) {
  const int n = *rc::gen::inRange(0, 5001);
  const long cut = *rc::gen::inRange(1, 2001);
  const bool integer = *rc::gen::arbitrary<bool>();
  const long j = integer ? *rc::gen::inRange(0L, cut + 1) : *rc::gen::inRange(0L, (1L << 20) + 1);
  const std::string alpha = std::to_string(n) + "e-3";
  RC_TAG(integer);

  mpfr_real expected;
  mpfr_real tau_exact;
  {
    PrecisionScope scope(kIndependentBits);
    tau_exact = integer ? mpfr_real(j) : mpfr_real(ldexp(mpfr_real(cut * j), -20));
    const core::GateParams<mpfr_real> gate{core::GateKind::cosine, core::parse_real<mpfr_real>(alpha, "alpha"),
                                           mpfr_real(cut)};
    expected = core::sigma(tau_exact, gate);
  }
  const th::Interval enclosure = th::sigma_enclosure(th::Interval::point(tau_exact),
                                                     th::IntervalGate{th::Interval::from_decimal(alpha, "a"), cut});
  // core::sigma at 600 bits is within 8 ulps (sin, exp, a product, a square: each correctly rounded,
  // well conditioned on [0, τ_cut]), i.e. 2^-590 relative: the allowed slack on either side.
  PrecisionScope scope(kIndependentBits);
  RC_ASSERT(enclosure.lower() <= nudge(expected, -590));
  RC_ASSERT(expected <= nudge(enclosure.upper(), -590));
  // ...and the enclosure is tight: a few ulps at 257 bits, not a loose a-priori range.
  if (expected > 0) RC_ASSERT(enclosure.relative_width() < 1e-70);
}

TEST_F(TheoryIntervalGate, ExactEndpoints) {
  const th::IntervalGate gate{th::Interval::from_decimal("0.2", "alpha"), 32};
  EXPECT_TRUE(th::sigma_enclosure(th::Interval(0), gate).contains(mpfr_real(1)));
  EXPECT_TRUE(th::sigma_enclosure(th::Interval(32), gate).contains(mpfr_real(0)));
  EXPECT_EQ(th::sigma_enclosure(th::Interval(32), gate).upper(), 0);
  EXPECT_THROW(th::sigma_enclosure(th::Interval(33), gate), std::logic_error);
  EXPECT_THROW(th::sigma_enclosure(th::Interval(-1), gate), std::logic_error);
}

// The derivative's sign brackets the maximizer: positive just left of τ*, negative just right (τ* = 4.5032…
// for the defaults, from the double bisection in theory_constants_test).
TEST_F(TheoryIntervalGate, LogDerivativeSigns) {
  const th::IntervalGate gate{th::Interval::from_decimal("0.2", "alpha"), 32};
  EXPECT_TRUE(th::log_weight_derivative(th::Interval::from_decimal("4.5", "t"), 1, gate).strictly_positive());
  EXPECT_TRUE(th::log_weight_derivative(th::Interval::from_decimal("4.51", "t"), 1, gate).strictly_negative());
}

}  // namespace
