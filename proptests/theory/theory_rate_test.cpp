// theory/rate.hpp: the bound at its best η against the ungated update's, and the α scan behind what
// "O(1/e^α)" can mean.
//  * The closed form R = √(E[στ] + E[σ²]/2)/(E[σ]·√(E[τ] + ½)) is the ratio of the two bounds each minimized over
//    η — checked by minimizing A/η + Bη numerically for random constants and random delay laws.
//  * At a constant delay R = √((τ + σ/2)/(σ(τ + ½))) ≥ 1, against an independent 600-bit σ; 6.89989 at τ = 16.
//  * The laws' moments against direct sums of core::sigma at 600 bits (uniform, heavy tail capped/uncapped).
//  * The α scan's enclosures contain independent values, and the numbers the README quotes hold.
#include "support/theory_test_support.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "cgad/core/errors.hpp"
#include "cgad/theory/constants.hpp"
#include "cgad/theory/rate.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
namespace th = cgad::theory;
namespace tt = cgad::theory_test;
using ref::mpfr_real;

class TheoryRate : public ::testing::Test {
 protected:
  void SetUp() override { ref::set_working_precision_bits(256); }
};

th::IntervalGate interval_gate(const char* alpha, long cut) {
  return {th::Interval::from_decimal(alpha, "alpha"), cut};
}

// min over η > 0 of A/η + B·η, by golden-section search on ln η (the function is convex in ln η), in double.
double minimize(double A, double B) {
  auto f = [&](double log_eta) { return A / std::exp(log_eta) + B * std::exp(log_eta); };
  const double centre = 0.5 * std::log(A / B);
  double a = centre - 30, b = centre + 30;
  const double inv_phi = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 200; ++i) {
    const double c = b - inv_phi * (b - a), d = a + inv_phi * (b - a);
    if (f(c) < f(d)) {
      b = d;
    } else {
      a = c;
    }
  }
  return f((a + b) / 2);
}

// Random positive Δ = f(x_0) − f*, L, G, ρ and a random law on {0..K}: the optimized gated and ungated bounds,
// found numerically from the bound's own form, have the ratio compare_optimized_eta states, and η*'s ratio too.
RC_GTEST_FIXTURE_PROP(TheoryRate, ClosedFormIsTheRatioOfTheMinimizedBounds, ()) {
  const long K = *rc::gen::inRange(0L, 60L);
  const long cut = *rc::gen::inRange(1L, 64L);
  const auto weights = *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(K + 1), rc::gen::inRange(0, 100));
  double total = 0;
  for (int w : weights) total += w;
  RC_PRE(total > 0);
  const core::GateParams<mpfr_real> gate = tt::cosine_gate("0.2", cut);
  mpfr_real s(0), st(0), s2(0), t(0);
  for (long j = 0; j <= K; ++j) {
    const mpfr_real p = mpfr_real(weights[static_cast<std::size_t>(j)]) / total;
    const mpfr_real sigma = core::sigma(mpfr_real(j), gate);
    s += p * sigma;
    st += p * sigma * j;
    s2 += p * sigma * sigma;
    t += p * j;
  }
  RC_PRE(s > 0);
  th::DelayLawMoments law{
      "random", th::Interval::point(s), th::Interval::point(st), th::Interval::point(s2), th::Interval::point(t),
      false};
  const th::OptimizedEtaComparison c = th::compare_optimized_eta(law);
  RC_ASSERT(!c.gated_vacuous);
  RC_ASSERT(!c.ungated_vacuous);
  const double delta = *rc::gen::inRange(1, 1000) / 10.0, L = *rc::gen::inRange(1, 100) / 10.0;
  const double G = *rc::gen::inRange(1, 100) / 10.0, rho = *rc::gen::inRange(1, 100) / 100.0;
  const double T = 1000;
  // (S)/(ρΣσ_t): A = Δ/(ρΣσ), B = L·G²·S_T/(ρΣσ), with Σσ = T·E[σ], S_T = T·(E[στ] + E[σ²]/2); ungated σ ≡ 1.
  const double Es = s.convert_to<double>(), Est = st.convert_to<double>(), Es2 = s2.convert_to<double>();
  const double Et = t.convert_to<double>();
  const double gated = minimize(delta / (rho * T * Es), L * G * G * T * (Est + Es2 / 2) / (rho * T * Es));
  const double ungated = minimize(delta / (rho * T), L * G * G * T * (Et + 0.5) / (rho * T));
  const double ratio = c.bound_ratio.midpoint().convert_to<double>();
  RC_ASSERT(std::abs(gated / ungated - ratio) <= 1e-9 * ratio);
  // η* = √(A/B): its ratio gated/ungated.
  const double eta_gated = std::sqrt(delta / (L * G * G * T * (Est + Es2 / 2)));
  const double eta_ungated = std::sqrt(delta / (L * G * G * T * (Et + 0.5)));
  RC_ASSERT(std::abs(eta_gated / eta_ungated - c.eta_ratio.midpoint().convert_to<double>()) <=
            1e-12 * eta_gated / eta_ungated);
}

// Constant delays: R = √((τ + σ/2)/(σ(τ + ½))) with σ from core::sigma at 600 bits, inside the enclosure, and
// ≥ 1; vacuous from τ_cut on. The number: 6.89989 at τ = 16 for α = 0.2, τ_cut = 32.
TEST_F(TheoryRate, ConstantDelayRatioMatchesTheClosedForm) {
  for (const auto& [alpha, cut] : {std::pair<const char*, long>{"0.2", 32}, {"0.05", 100}, {"1.5", 8}, {"0", 20}}) {
    const th::IntervalGate gate = interval_gate(alpha, cut);
    for (long tau = 0; tau <= cut + 2; ++tau) {
      const th::OptimizedEtaComparison c = th::compare_optimized_eta(th::constant_delay_law(tau, gate));
      if (tau >= cut) {
        EXPECT_TRUE(c.gated_vacuous) << alpha << " " << tau;
        EXPECT_TRUE(c.bound_ratio.is_point_infinite());
        continue;
      }
      ASSERT_FALSE(c.gated_vacuous) << alpha << " " << tau;
      mpfr_real expected;
      {
        tt::PrecisionScope scope(tt::kIndependentBits);
        const mpfr_real sigma = core::sigma(mpfr_real(tau), tt::cosine_gate(alpha, cut));
        expected = sqrt((tau + sigma / 2) / (sigma * (mpfr_real(tau) + mpfr_real("0.5"))));
      }
      EXPECT_TRUE(c.bound_ratio.contains(expected)) << alpha << " " << tau << " " << c.bound_ratio.to_string(30);
      EXPECT_LT(c.bound_ratio.relative_width(), 1e-60);
      EXPECT_GE(c.bound_ratio.upper(), 1) << alpha << " " << tau;  // = 1 exactly at τ = 0 (σ = 1)
    }
  }
  const th::OptimizedEtaComparison at16 =
      th::compare_optimized_eta(th::constant_delay_law(16, interval_gate("0.2", 32)));
  EXPECT_NEAR(at16.bound_ratio.midpoint().convert_to<double>(), 6.89989, 5e-6);
}

// Uniform and heavy-tailed laws: moments against direct 600-bit sums of core::sigma with the law written out.
TEST_F(TheoryRate, LawMomentsMatchDirectSums) {
  const th::IntervalGate gate = interval_gate("0.2", 32);
  struct Expected {
    mpfr_real s, st, s2, t;
  };
  auto direct = [](const std::vector<std::pair<long, mpfr_real>>& law) {
    tt::PrecisionScope scope(tt::kIndependentBits);
    const auto g = tt::cosine_gate("0.2", 32);
    Expected e{mpfr_real(0), mpfr_real(0), mpfr_real(0), mpfr_real(0)};
    for (const auto& [tau, p] : law) {
      const mpfr_real sigma = core::sigma(mpfr_real(tau), g);
      e.s += p * sigma;
      e.st += p * sigma * tau;
      e.s2 += p * sigma * sigma;
      e.t += p * tau;
    }
    return e;
  };
  auto check = [](const th::DelayLawMoments& m, const Expected& e, bool tau_too) {
    EXPECT_TRUE(m.mean_sigma.contains(e.s)) << m.name;
    EXPECT_TRUE(m.mean_sigma_tau.contains(e.st)) << m.name;
    EXPECT_TRUE(m.mean_sigma_squared.contains(e.s2)) << m.name;
    if (tau_too) EXPECT_TRUE(m.mean_tau.contains(e.t)) << m.name;
  };
  for (long K : {0L, 5L, 31L, 32L, 100L}) {
    std::vector<std::pair<long, mpfr_real>> law;
    {
      tt::PrecisionScope scope(tt::kIndependentBits);
      for (long j = 0; j <= K; ++j) law.emplace_back(j, mpfr_real(1) / (K + 1));
    }
    check(th::uniform_delay_law(K, gate), direct(law), true);
  }
  // Heavy tail: P(0) = 0.7, P(j) = 0.3·8/(j(j+1)) for 8 ≤ j < cap, P(cap) = 0.3·8/cap.
  for (long cap : {8L, 20L, 64L, 1024L}) {
    std::vector<std::pair<long, mpfr_real>> law;
    {
      tt::PrecisionScope scope(tt::kIndependentBits);
      const mpfr_real share("0.3");
      law.emplace_back(0, mpfr_real(1) - share);
      for (long j = 8; j < cap; ++j) law.emplace_back(j, share * 8 / (mpfr_real(j) * (j + 1)));
      law.emplace_back(cap, share * 8 / cap);
      mpfr_real total(0);
      for (const auto& [tau, p] : law) total += p;
      EXPECT_LT(abs(total - 1), ldexp(mpfr_real(1), -500));
    }
    check(th::heavy_tail_delay_law(cap, gate), direct(law), true);
  }
  // Uncapped: E τ = +∞ (Σ 8/(j+1) diverges), so the ungated bound is vacuous and R = 0; the gated moments are
  // those of the law cut at τ_cut (σ = 0 beyond).
  const th::DelayLawMoments heavy = th::heavy_tail_delay_law(std::nullopt, gate);
  EXPECT_TRUE(heavy.mean_tau_infinite);
  std::vector<std::pair<long, mpfr_real>> law;
  {
    tt::PrecisionScope scope(tt::kIndependentBits);
    for (long j = 8; j < 32; ++j) law.emplace_back(j, mpfr_real("0.3") * 8 / (mpfr_real(j) * (j + 1)));
    law.emplace_back(0, mpfr_real("0.7"));
  }
  check(heavy, direct(law), false);
  const th::OptimizedEtaComparison c = th::compare_optimized_eta(heavy);
  EXPECT_TRUE(c.ungated_vacuous);
  EXPECT_EQ(c.bound_ratio.upper(), 0);
}

// The table `cgad bound` prints, and the signs the README states: R ≥ 1 at every constant delay; R > 1 for the
// uniform laws too (most of their mass is stale, and E[σ] is small); R < 1 only for the mostly-fresh heavy tail.
TEST_F(TheoryRate, TableHasTheStatedShape) {
  const auto rows = th::optimized_eta_table("0.2", 32);
  ASSERT_EQ(rows.size(), 7u + 3u + 3u);  // constant 1, 2, 4, 8, 16, 31, 32; uniform 16, 64, 256; heavy 64, 1024, ∞
  for (const auto& r : rows) {
    if (r.law.name.rfind("constant", 0) == 0 && !r.gated_vacuous) EXPECT_GE(r.bound_ratio.lower(), 1) << r.law.name;
    if (r.law.name.rfind("uniform", 0) == 0) EXPECT_GT(r.bound_ratio.lower(), 1) << r.law.name;
    if (r.law.name.rfind("heavy", 0) == 0) EXPECT_LT(r.bound_ratio.upper(), 1) << r.law.name;
  }
  EXPECT_TRUE(rows[6].gated_vacuous);  // constant τ = 32 = τ_cut
  EXPECT_THROW(th::optimized_eta_table("-1", 32), core::InputError);
  EXPECT_THROW(th::optimized_eta_table("0.2", 0), core::InputError);
}

// The α scan: enclosures contain an independent evaluation (golden-section search and direct sums on
// core::sigma at 600 bits), and the facts theory/README.md §5 draws from it hold, at τ_cut = 32:
//  * α·B1 < 1/e always, and α·B1 ≥ cos²(π/(2ατ_cut))/e once α·τ_cut ≥ 1: B1 ~ 1/(eα) is Θ(1/α), never e^{−α};
//  * for α ∈ [1/τ_cut, 0.6] (the paper's 0.2 and 0.4 among them) α·W ∈ [0.45, 0.85] and α·B1_int ∈ [0.2, 1/e]:
//    W and the integer constant are Θ(1/α) there too, while e^{−α} moves by less than a factor 2;
//  * from α = 0.7 on, the integer maximizer is τ = 1, so B1_int = σ(1) = γ(1)·e^{−α} exactly, and for α ≥ 4
//    e^α·W is within 2 % of γ(1) = cos²(π/(2τ_cut)): there — where one step of delay already costs more than
//    half the weight — W and B1_int do decay like e^{−α}. B1 (real τ) still does not.
TEST_F(TheoryRate, AlphaScanSaysWhatTheReadmeSays) {
  const long cut = 32;
  const auto rows = th::alpha_scan(cut, th::default_alpha_scan());
  ASSERT_EQ(rows.size(), th::default_alpha_scan().size());
  mpfr_real gamma1;
  {
    tt::PrecisionScope scope(tt::kIndependentBits);
    gamma1 = core::sigma(mpfr_real(1), tt::cosine_gate("0", cut));  // γ(1), α = 0
  }
  for (const auto& r : rows) {
    const double alpha = std::stod(r.alpha);
    {
      tt::PrecisionScope scope(tt::kIndependentBits);
      const auto gate = tt::cosine_gate(r.alpha.c_str(), cut);
      const mpfr_real b1 = tt::golden_section_max(1, gate);
      mpfr_real w(0), b1_int(0);
      for (long tau = 1; tau <= cut; ++tau) {
        const mpfr_real sigma = core::sigma(mpfr_real(tau), gate);
        w += sigma;
        if (tau * sigma > b1_int) b1_int = tau * sigma;
      }
      EXPECT_LE(b1, tt::nudge(r.b1.upper(), -200)) << r.alpha;
      EXPECT_GE(tt::nudge(b1, -200), r.b1.lower()) << r.alpha;
      EXPECT_TRUE(r.w.contains(w)) << r.alpha;
      EXPECT_TRUE(r.b1_integer.contains(b1_int)) << r.alpha;
    }
    const double ab1 = r.alpha_b1.midpoint().convert_to<double>(), aw = r.alpha_w.midpoint().convert_to<double>();
    const double ab1_int = alpha * r.b1_integer.midpoint().convert_to<double>();
    EXPECT_LT(ab1, std::exp(-1.0)) << r.alpha;
    if (alpha * cut >= 1) EXPECT_GE(ab1, std::pow(std::cos(M_PI / (2 * alpha * cut)), 2) / std::exp(1.0)) << r.alpha;
    if (alpha * cut >= 1 && alpha <= 0.6) {
      EXPECT_GE(aw, 0.45) << r.alpha;
      EXPECT_LE(aw, 0.85) << r.alpha;
      EXPECT_GE(ab1_int, 0.2) << r.alpha;
      EXPECT_LE(ab1_int, std::exp(-1.0)) << r.alpha;
      EXPECT_GE(r.b1_integer_argmax, 2) << r.alpha;
    }
    if (alpha >= 0.7) {
      EXPECT_EQ(r.b1_integer_argmax, 1) << r.alpha;
      EXPECT_TRUE(r.exp_alpha_b1_integer.contains(gamma1)) << r.alpha << " " << r.exp_alpha_b1_integer.to_string(20);
    }
    if (alpha >= 4) {
      EXPECT_NEAR(r.exp_alpha_w.midpoint().convert_to<double>() / gamma1.convert_to<double>(), 1.0, 0.02) << r.alpha;
    }
  }
  EXPECT_THROW(th::alpha_scan(cut, {"-0.1"}), core::InputError);
}

}  // namespace
