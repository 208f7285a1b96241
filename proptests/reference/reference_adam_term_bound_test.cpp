// The bound on the Adam term A = |m̂|/(√v̂ + ε) that validate_range's overflow rule rests on (core/hyperparams.hpp):
// K = (1 − β1)/√((1 − β2)(1 − β1²/β2)) for β1² < β2 whatever ε and the step count, only 2^63/ε for β1² ≥ β2; and the
// rule built from it refuses exactly the combinations whose step can pass 2^126.
#include "cgad/core/hyperparams.hpp"
#include "cgad/reference/real.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
using core::InputError;
using ref::mpfr_real;

std::string hex(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", x);
  return buffer;
}

// The largest A over steps 1..T of the sequence that makes Cauchy–Schwarz tight at step T (g_k ∝ (β1/β2)^(T−k),
// i.e. ∝ (β2/β1)^k), in long double with ε = 0: A_t = |m_t/(1 − β1^t)| / √(v_t/(1 − β2^t)).
long double worst_adam_term(long double beta1, long double beta2, int steps) {
  std::vector<long double> g(steps);
  for (int k = 0; k < steps; ++k) g[k] = std::pow(beta2 / beta1, static_cast<long double>(k));
  long double m = 0, v = 0, worst = 0, p1 = 1, p2 = 1;
  for (int t = 1; t <= steps; ++t) {
    m = beta1 * m + (1 - beta1) * g[t - 1];
    v = beta2 * v + (1 - beta2) * g[t - 1] * g[t - 1];
    p1 *= beta1;
    p2 *= beta2;
    worst = std::max(worst, std::fabs(m / (1 - p1)) / std::sqrt(v / (1 - p2)));
  }
  return worst;
}

TEST(AdamTermBound, HoldsAndIsApproachedWhenBetaOneSquaredIsBelowBetaTwo) {
  std::mt19937_64 rng(20261202);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 400; ++trial) {
    const double beta2 = 0.5 + 0.49 * unit(rng);
    const double beta1 = std::sqrt(beta2) * (0.1 + 0.89 * unit(rng));    // β1² < β2; (β2/β1)^400 stays in range
    const double k = cgad::core::adam_term_bound(beta1, beta2, 1e-300);  // ε so small that K is the bound
    const long double worst = worst_adam_term(beta1, beta2, 400);
    EXPECT_LE(worst, k * (1 + 1e-12)) << "beta1 " << hex(beta1) << " beta2 " << hex(beta2) << " K " << hex(k);
  }
  // The defaults: K = 0.1/√(0.001·(1 − 0.81/0.999)) = 7.2703..., and the tight sequence gets within 1% of it.
  const double k = cgad::core::adam_term_bound(0.9, 0.999, 1e-30);
  EXPECT_NEAR(k, 7.27035, 1e-4) << hex(k);
  EXPECT_GT(worst_adam_term(0.9L, 0.999L, 20000), 0.99L * k);
}

TEST(AdamTermBound, OnlyEpsBoundsItWhenBetaOneSquaredReachesBetaTwo) {
  // One gradient then zeros: A grows like (β1/√β2)^t, past any constant; the bound is then 2^63/ε.
  long double m = 0, v = 0, p1 = 1, p2 = 1, last = 0;
  for (int t = 1; t <= 60; ++t) {
    const long double g = t == 1 ? 1 : 0;
    m = 0.99L * m + 0.01L * g;
    v = 0.1L * v + 0.9L * g * g;
    p1 *= 0.99L;
    p2 *= 0.1L;
    last = std::fabs(m / (1 - p1)) / std::sqrt(v / (1 - p2));
  }
  EXPECT_GT(last, 1e25L);
  EXPECT_EQ(cgad::core::adam_term_bound(0.99, 0.1, 1e-30), 0x1p63 / 1e-30);
  // β1² = β2 exactly (0.5² = 0.25): unbounded too; one ulp of β2 above, K takes over.
  EXPECT_EQ(cgad::core::adam_term_bound(0.5, 0.25, 1e-8), 0x1p63 / 1e-8);
  EXPECT_LT(cgad::core::adam_term_bound(0.5, std::nextafter(0.25, 1.0), 1e-8), 0x1p63 / 1e-8);
  // β1 = 0: A ≤ 1/√(1 − β2), also at β2 = 0.
  EXPECT_EQ(cgad::core::adam_term_bound(0.0, 0.0, 1e-30), 1.0);
  EXPECT_EQ(cgad::core::adam_term_bound(0.0, 0.75, 1e-30), 2.0);
}

// The combination that sent θ to -Inf (exit 0, "0 skipped") is refused in every scalar type the backends validate
// in; the defaults, the largest lr, torch's common betas and a tiny ε under β1² < β2 are not.
TEST(AdamTermBound, ValidateRangeRefusesAStepThatCanPassTwoToThe126) {
  const auto refused = [](const auto& h) {
    try {
      core::validate_range(h);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  core::AdamHyper<float> f;
  f.lr = 1.0f;
  f.beta1 = 0.99f;
  f.beta2 = 0.1f;
  f.eps = 1e-30f;
  EXPECT_NE(refused(f).find("2^126"), std::string::npos) << refused(f);
  core::AdamHyper<mpfr_real> r;
  r.lr = core::parse_real<mpfr_real>("1", "lr");
  r.beta1 = core::parse_real<mpfr_real>("0.99", "beta1");
  r.beta2 = core::parse_real<mpfr_real>("0.1", "beta2");
  r.eps = core::parse_real<mpfr_real>("1e-30", "eps");
  EXPECT_NE(refused(r).find("2^126"), std::string::npos) << refused(r);
  // The same betas with ε at the rule's edge, 2^-63·max(lr, 1/√(1 − β2)), and just below it.
  f.eps = static_cast<float>(0x1p-63 / std::sqrt(1 - static_cast<double>(f.beta2))) * 1.0000002f;
  EXPECT_EQ(refused(f), "") << hex(f.eps);
  f.eps = static_cast<float>(0x1p-63 / std::sqrt(1 - static_cast<double>(f.beta2))) * 0.9999998f;
  EXPECT_NE(refused(f), "") << hex(f.eps);

  core::AdamHyper<float> ok;
  EXPECT_EQ(refused(ok), "");
  ok.lr = static_cast<float>(cgad::core::kMaxLearningRate);
  EXPECT_EQ(refused(ok), "");
  ok = {};
  ok.beta2 = 0.95f;
  ok.eps = 1e-45f;  // K bounds A whatever ε when β1² < β2
  EXPECT_EQ(refused(ok), "");
}

}  // namespace
