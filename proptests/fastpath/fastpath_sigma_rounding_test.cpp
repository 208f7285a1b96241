// The fast path's staleness factor is the float nearest the reference's: σ(τ) of CGAD, PA-CGAD's table of ages,
// Adam-Decay's e^{−ατ} and SDM's 1/(1 + τ), as the step planner hands them to both backends, against the MPFR
// reference at 256 bits (α and τ_cut parsed from their decimals, as `cgad replay --backend reference` does) rounded
// once to float, bit for bit, for every τ the gate is not 0 at (fastpath/include/cgad/fastpath/detail/staleness.hpp
// states the error bound that makes these agree unless σ lies within 2^-46 of a float midpoint).
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/reference/real.hpp"

#include <gtest/gtest.h>
#include <mpfr.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using cgad::core::GateKind;
using cgad::core::OptimizerKind;
using cgad::fastpath::StepConfig;
using cgad::fastpath::StepPlanner;
using cgad::fastpath::testing::hex;
using cgad::reference::mpfr_real;

constexpr unsigned kBits = 256;

// The reference's σ(τ) at 256 bits, rounded once to float (mpfr_get_flt rounds correctly, subnormals included).
float reference_sigma(GateKind kind, const std::string& alpha, const std::string& tau_cut, std::int64_t tau) {
  cgad::core::GateParams<mpfr_real> gate;
  gate.kind = kind;
  gate.alpha = cgad::core::parse_real<mpfr_real>(alpha, "alpha");
  gate.tau_cut = cgad::core::parse_real<mpfr_real>(tau_cut, "tau_cut");
  const mpfr_real sigma = cgad::core::sigma(mpfr_real(tau), gate);
  return mpfr_get_flt(sigma.backend().data(), MPFR_RNDN);
}

StepConfig config_of(OptimizerKind kind, const std::string& alpha, const std::string& tau_cut, std::size_t fragments) {
  StepConfig config;
  config.optimizer = kind;
  config.params = cgad::fastpath::ParamFormat::fp32;
  config.alpha = std::stod(alpha);  // the double nearest the decimal, as the command line and Python pass it
  config.tau_cut = std::stod(tau_cut);
  config.fragments = fragments;
  return config;
}

// σ as the planner schedules it for an event of staleness τ (one element, one fragment).
float planned_sigma(const StepPlanner& planner, std::int64_t tau) {
  const std::size_t n = planner.parameters();
  return planner.plan(n, planner.fragment_size(0), tau, 0).scheduled.sigma;
}

// Every mismatch as "τ: fast path <hex> reference <hex>", at most 12.
struct Mismatches {
  std::size_t count = 0;
  std::string shown;
  void check(std::int64_t tau, float fast, float ideal) {
    if (std::bit_cast<std::uint32_t>(fast) == std::bit_cast<std::uint32_t>(ideal)) return;
    if (++count <= 12)
      shown += "\n  tau " + std::to_string(tau) + ": fast path " + hex(fast) + " reference " + hex(ideal);
  }
};

const std::vector<std::string> kAlphas = {"0.2", "0.05", "0.1", "0.4", "1.0", "0.0137"};
const std::vector<std::string> kTauCuts = {"2", "7", "32", "1000"};

TEST(StalenessFactorRounding, CgadSigmaIsTheFloatNearestTheReferencesForEveryTauBelowTheCut) {
  cgad::reference::PrecisionScope precision(kBits);
  std::size_t checked = 0;
  for (const std::string& alpha : kAlphas) {
    for (const std::string& tau_cut : kTauCuts) {
      const StepPlanner planner(config_of(OptimizerKind::cgad, alpha, tau_cut, 1), 1);
      Mismatches bad;
      const std::int64_t cut = std::stoll(tau_cut);
      for (std::int64_t tau = 0; tau <= cut; ++tau, ++checked) {  // τ = τ_cut: exactly 0 on both sides
        bad.check(tau, planned_sigma(planner, tau), reference_sigma(GateKind::cosine, alpha, tau_cut, tau));
      }
      EXPECT_EQ(bad.count, 0u) << "alpha " << alpha << " tau_cut " << tau_cut << bad.shown;
    }
  }
  EXPECT_GT(checked, 6u * 1000);
}

// The three delays at the default α = 0.2: a float α (0.2f) put σ one ulp off at each (σ(31) =
// 0x1.47ea7ap-18 where the nearest float to the true 4.8861316068e-6 is 0x1.47ea7cp-18).
TEST(StalenessFactorRounding, DefaultAlphaAtSixteenTwentyFourThirtyOne) {
  cgad::reference::PrecisionScope precision(kBits);
  const StepPlanner planner(config_of(OptimizerKind::cgad, "0.2", "32", 1), 1);
  for (const std::int64_t tau : {16, 24, 31}) {
    const float fast = planned_sigma(planner, tau), ideal = reference_sigma(GateKind::cosine, "0.2", "32", tau);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(fast), std::bit_cast<std::uint32_t>(ideal))
        << "tau " << tau << ": fast path " << hex(fast) << " reference " << hex(ideal);
  }
}

TEST(StalenessFactorRounding, PaCgadAgeTableIsTheFloatNearestTheReferences) {
  cgad::reference::PrecisionScope precision(kBits);
  for (const std::string& alpha : kAlphas) {
    for (const std::string& tau_cut : kTauCuts) {
      const StepPlanner planner(config_of(OptimizerKind::pa_cgad, alpha, tau_cut, 2), 2);
      const std::vector<float>& table = planner.age_sigma();
      ASSERT_EQ(table.size(), static_cast<std::size_t>(std::stoll(tau_cut))) << "the ages below tau_cut";
      Mismatches bad;
      for (std::size_t age = 0; age < table.size(); ++age) {
        const auto a = static_cast<std::int64_t>(age);
        bad.check(a, table[age], reference_sigma(GateKind::cosine, alpha, tau_cut, a));
      }
      EXPECT_EQ(bad.count, 0u) << "alpha " << alpha << " tau_cut " << tau_cut << bad.shown;
    }
  }
}

// Adam-Decay's e^{−ατ}, over every τ until it is past float's smallest subnormal (ατ > 104) and a little beyond.
TEST(StalenessFactorRounding, AdamDecaySigmaIsTheFloatNearestTheReferences) {
  cgad::reference::PrecisionScope precision(kBits);
  for (const std::string& alpha : kAlphas) {
    const StepPlanner planner(config_of(OptimizerKind::adam_decay, alpha, "32", 1), 1);
    const auto last = static_cast<std::int64_t>(110 / std::stod(alpha));
    Mismatches bad;
    for (std::int64_t tau = 0; tau <= last; ++tau) {
      bad.check(tau, planned_sigma(planner, tau), reference_sigma(GateKind::exponential, alpha, "32", tau));
    }
    EXPECT_EQ(bad.count, 0u) << "alpha " << alpha << bad.shown;
    EXPECT_EQ(planned_sigma(planner, last), 0.0f) << "alpha " << alpha << ": sigma past float's range";
  }
}

// SDM's 1/(1 + τ) against the reference's, for τ < 2^17, around every power of two, at the largest τ, and at τ where
// 1/(1 + τ) lies within 2^-54 (relative) of a float midpoint (1 + τ = (2^e ± 1)/k, k odd in (2^24, 2^25)): rounded
// to double first and then to float, as 1.0/(1.0 + τ) did, those went the wrong way.
TEST(StalenessFactorRounding, SdmScaleIsTheFloatNearestOneOverOnePlusTau) {
  cgad::reference::PrecisionScope precision(kBits);
  const StepPlanner planner(config_of(OptimizerKind::sdm, "0.2", "32", 1), 1);
  std::vector<std::int64_t> taus;
  for (std::int64_t tau = 0; tau < (1 << 17); ++tau) taus.push_back(tau);
  for (int k = 17; k < 63; ++k) {
    for (std::int64_t d = -3; d <= 3; ++d) taus.push_back((std::int64_t{1} << k) + d);
  }
  taus.push_back(INT64_MAX);
  taus.push_back(INT64_MAX - 1);
  taus.push_back(0x5851F42D4C957F2D);  // odd, far from any power of two
  for (const std::int64_t near_midpoint :
       {846731598LL, 939524102LL, 943201286LL, 1614112202LL, 2004436222LL, 3394919014LL, 4026531854LL, 67645734974LL}) {
    taus.push_back(near_midpoint);
  }
  Mismatches bad;
  for (const std::int64_t tau : taus) {
    mpfr_real one_plus(tau);
    one_plus += 1;
    const mpfr_real scale = mpfr_real(1) / one_plus;
    bad.check(tau, planned_sigma(planner, tau), mpfr_get_flt(scale.backend().data(), MPFR_RNDN));
  }
  EXPECT_EQ(bad.count, 0u) << bad.shown;
}

}  // namespace
