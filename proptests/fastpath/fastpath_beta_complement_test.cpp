// The fast path's 1 − β1 and 1 − β2 in cgad semantics are the floats nearest the MPFR reference's 1 − β of the
// user's decimal (parsed at 256 bits, as `cgad replay --backend reference` parses it), bit for bit, for the usual
// betas, decimals near 1 and near 0, exponent forms and random decimals; its bias corrections 1 − β^t likewise,
// away from float midpoints (fastpath/detail/derived_constants.hpp and step_schedule.hpp state the rounding). bnb
// semantics keeps bitsandbytes' 1.0f − β of the float β. Before, cgad semantics also formed 1 − RN_f(β):
// 0.00099998712 for 0.999, where the decimal (and torch.optim.Adam) mean 0.001.
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/options.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/core/decimal_complement.hpp"
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/reference/real.hpp"

#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using cgad::fastpath::StepConfig;
using cgad::fastpath::StepPlanner;
using cgad::fastpath::testing::hex;
using cgad::reference::mpfr_real;

constexpr unsigned kBits = 256;

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

mpfr_real reference_beta(const std::string& decimal) {
  return cgad::core::parse_real<mpfr_real>(decimal, "beta");
}

float nearest_float(const mpfr_real& x) {
  return mpfr_get_flt(x.backend().data(), MPFR_RNDN);
}

// Whether x lies within 2^-45 (relative) or 2^-53 (absolute) of a midpoint between two floats: there the fast path's
// bias corrections may round the other way. They are 1 − RN_d(β^t) rounded to float, β^t formed in double-double from
// a β within 2^-53·(1 − β) of the decimal's: RN_d adds up to 2^-54 absolute, which is not small against 1 − β^t where
// β lies near 1 (2^-54 is 2^-28 of 1 − β^t at 1 − β = 10^-8, t = 1: 1 − β^t is then the nearest float or its
// neighbour, docs/design.md §5).
bool near_float_midpoint(const mpfr_real& x) {
  const float f = nearest_float(x);
  const double spacing = std::ldexp(1.0, std::ilogb(f) - 23);
  const mpfr_real offset = abs(x - mpfr_real(f));  // ≤ spacing/2 (at a power of two, the lower spacing is half)
  const double distance = std::fabs(offset.convert_to<double>() - spacing / 2);
  const double lower = std::fabs(offset.convert_to<double>() - spacing / 4);
  return std::min(distance, lower) <= std::max(std::ldexp(std::fabs(static_cast<double>(f)), -45), 0x1p-53);
}

// A configuration whose β1 and β2 are both `decimal`, as `cgad replay --beta1 D --beta2 D` and cgad.torch build it.
StepConfig config_of(const std::string& decimal, cgad::fastpath::Q8Semantics semantics) {
  cgad::core::OptimizerOptions options;
  options.optimizer = "adam";
  options.beta1 = decimal;
  options.beta2 = decimal;
  StepConfig config = cgad::fastpath::fastpath_step_config(options);
  config.params = cgad::fastpath::ParamFormat::fp32;
  config.q8_semantics = semantics;
  return config;
}

// The decimals of the comparisons; with `float_one`, also those whose float is 1 (within 2^-25 of 1), which cgad
// semantics takes (its 1 − β is of the decimal) and bnb semantics refuses (its 1.0f − β would be 0).
std::vector<std::string> decimals(bool float_one) {
  std::vector<std::string> out = {"0.9",
                                  "0.999",
                                  "0.95",
                                  "0.99",
                                  "0.9999",
                                  "0.5",
                                  "0.1",
                                  "1e-8",
                                  "0",
                                  "0.0",
                                  "0.98",
                                  "0.995",
                                  "0.99999",
                                  "0.999999",
                                  "0.9999999",
                                  "0.99999997",
                                  "9.99e-1",
                                  "999e-3",
                                  "0.75",
                                  "0.25",
                                  "0.3",
                                  "0.123456789012345678901234567890",
                                  "0.99951171875",
                                  "0.999511718750000000000001",
                                  "0.999511718749999999999999",
                                  "1e-40",
                                  "3e-45",
                                  "0.00000001",
                                  ".9",
                                  "+0.9"};
  std::mt19937_64 random(20261203);
  for (int i = 0; i < 3000; ++i) {
    std::string d = "0.";
    if (i % 3 == 1) d += std::string(1 + random() % 6, '9');  // close to 1, where 1 − β is small
    const std::size_t digits = 1 + random() % 25;
    for (std::size_t k = 0; k < digits; ++k) d.push_back(static_cast<char>('0' + random() % 10));
    if (i % 3 == 2) d += "e-" + std::to_string(random() % 12);
    if (float_one || cgad::core::parse_real<float>(d, "beta") < 1.0f) out.push_back(d);
  }
  if (float_one) out.insert(out.end(), {"0.99999999", "0.999999999", "0.9999999701", "0.99999999999999"});
  return out;
}

float one_minus_beta2(const StepConfig& config) {
  return StepPlanner(config, std::size_t{1}).schedule_constants().one_minus_beta2;
}

TEST(BetaComplementRounding, CgadOneMinusBetaIsTheFloatNearestTheReferencesOneMinusTheDecimal) {
  cgad::reference::PrecisionScope precision(kBits);
  std::size_t mismatches = 0;
  for (const std::string& decimal : decimals(true)) {
    const StepConfig config = config_of(decimal, cgad::fastpath::Q8Semantics::cgad);
    const auto c = StepPlanner(config, std::size_t{1}).schedule_constants();
    const float want = nearest_float(mpfr_real(1) - reference_beta(decimal));
    EXPECT_EQ(bits(c.one_minus_beta1), bits(want)) << decimal << ": " << hex(c.one_minus_beta1) << " vs " << hex(want);
    mismatches += bits(c.one_minus_beta2) != bits(want);
    // β itself is the float nearest the decimal, and the bias corrections' base is the decimal to 2^-53·(1 − β).
    EXPECT_EQ(bits(c.beta2), bits(nearest_float(reference_beta(decimal)))) << decimal;
    const mpfr_real base_error = abs(mpfr_real(c.base2_hi) + mpfr_real(c.base2_lo) - reference_beta(decimal));
    EXPECT_LE(base_error, (mpfr_real(1) - reference_beta(decimal)) * std::ldexp(1.0, -53)) << decimal;
  }
  EXPECT_EQ(mismatches, 0u);
}

// The figures: 1 − RN_f(0.999) = 0x1.0624p-10 (0.00099998712) was the constant, 0.001f is the decimal's.
TEST(BetaComplementRounding, DefaultsAreOneTenthAndOneThousandth) {
  StepConfig config;  // adam.beta1 = 0.9f, adam.beta2 = 0.999f, no decimals: read as 0.9 and 0.999
  config.optimizer = cgad::core::OptimizerKind::adam;
  const auto c = StepPlanner(config, std::size_t{1}).schedule_constants();
  EXPECT_EQ(bits(c.one_minus_beta1), bits(0.1f)) << hex(c.one_minus_beta1);
  EXPECT_EQ(bits(c.one_minus_beta2), bits(0.001f)) << hex(c.one_minus_beta2);
  EXPECT_EQ(bits(one_minus_beta2(config_of("0.999", cgad::fastpath::Q8Semantics::cgad))), bits(0.001f));
}

// bnb semantics: bitsandbytes' kernels form 1.0f − β from the float β (csrc/kernels.cu, bitsandbytes 0.50.2).
TEST(BetaComplementRounding, BnbKeepsOneMinusTheFloatBeta) {
  for (const std::string& decimal : decimals(false)) {
    const StepConfig config = config_of(decimal, cgad::fastpath::Q8Semantics::bnb);
    const auto c = StepPlanner(config, std::size_t{1}).schedule_constants();
    EXPECT_EQ(bits(c.one_minus_beta1), bits(1.0f - config.adam.beta1)) << decimal;
    EXPECT_EQ(bits(c.one_minus_beta2), bits(1.0f - config.adam.beta2)) << decimal;
    EXPECT_EQ(c.base2_hi, static_cast<double>(config.adam.beta2)) << decimal;
    EXPECT_EQ(c.base2_lo, 0.0) << decimal;
  }
}

// cgad's bias corrections RN_f(1 − β^t) against MPFR's 1 − β^t of the decimal, for t up to 10^6.
TEST(BetaComplementRounding, CgadBiasCorrectionsAreTheFloatsNearestTheReferences) {
  cgad::reference::PrecisionScope precision(kBits);
  std::vector<std::int64_t> steps;
  for (std::int64_t t = 1; t <= 64; ++t) steps.push_back(t);
  for (std::int64_t t : {100, 1000, 4097, 10000, 123457, 1000000}) steps.push_back(t);
  std::size_t checked = 0, near = 0;
  const std::vector<std::string> all = decimals(true);
  for (std::size_t k = 0; k < all.size(); k += 10) {  // every tenth: ~300 decimals × 70 steps
    const std::string& decimal = all[k];
    const StepConfig config = config_of(decimal, cgad::fastpath::Q8Semantics::cgad);
    const auto constants = StepPlanner(config, std::size_t{1}).schedule_constants();
    const mpfr_real beta = reference_beta(decimal);
    for (const std::int64_t t : steps) {
      const mpfr_real exact = mpfr_real(1) - pow(beta, mpfr_real(t));
      if (near_float_midpoint(exact)) {
        ++near;
        continue;
      }
      ++checked;
      const float got = cgad::fastpath::adam_coefficients(constants, 1.0f, t).bias2;
      ASSERT_EQ(bits(got), bits(nearest_float(exact))) << decimal << " t " << t << ": " << hex(got);
    }
  }
  EXPECT_GT(checked, 20000u);
  EXPECT_LT(near, 10u);
}

// A replay of Adam through the fast path (fp32 parameters and state) and the reference at 256 bits, each built from
// the same decimals as `cgad replay --backend fastpath|reference` builds them: m and v agree to the bound of the fast
// path's roundings. Per step the fast path's v = β2·v + (1 − β2)·(g·g) rounds 4 times, and its β2 and 1 − β2 are
// each within u = 2^-24 (relative) of the decimal's: the error grows by 5u(β2·V + (1 − β2)·g²) (V the exact v, every
// term ≥ 0) and the older error decays by β2; m's (3 roundings, the two constants) by 4u(β1·M + (1 − β1)·|g|), M the
// running absolute sum. Before, the fast path's 1 − β2 = 1 − RN_f(0.999) was 1.29·10^-5 (relative) off the
// reference's 0.001, about 20 times this bound after 10 steps.
TEST(BetaComplementRounding, ReplayAgreesWithTheReferenceOfTheDecimals) {
  cgad::reference::PrecisionScope precision(kBits);
  constexpr double u = 0x1p-24;
  constexpr std::size_t n = 512;
  constexpr int steps = 10;
  for (const auto& [beta1, beta2] : std::vector<std::pair<std::string, std::string>>{
           {"0.9", "0.999"}, {"0.95", "0.9999"}, {"0.5", "0.99"}, {"0.8", "0.95"}}) {
    cgad::core::OptimizerOptions options;
    options.optimizer = "adam";
    options.beta1 = beta1;
    options.beta2 = beta2;
    StepConfig config = cgad::fastpath::fastpath_step_config(options);
    config.params = cgad::fastpath::ParamFormat::fp32;
    cgad::fastpath::CpuOptimizer fast(config, n, 1);
    auto ideal = cgad::reference::make_optimizer(cgad::core::optimizer_config<mpfr_real>(options), n);
    std::mt19937_64 random(99);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> theta(n, 0.5f);
    std::vector<mpfr_real> ref_theta(n, mpfr_real(0.5));
    const double b1 = std::stod(beta1), b2 = std::stod(beta2);
    std::vector<double> big_m(n, 0), v(n, 0), e_m(n, 0), e_v(n, 0);
    for (int s = 0; s < steps; ++s) {
      std::vector<float> grad(n);
      for (std::size_t i = 0; i < n; ++i) grad[i] = normal(random) * std::ldexp(1.0f, static_cast<int>(i % 17) - 8);
      ASSERT_TRUE(fast.step(std::span<float>(theta), grad, 0).applied);
      const std::vector<mpfr_real> ref_grad(grad.begin(), grad.end());
      ASSERT_TRUE(ideal->apply(ref_theta, {ref_grad, 0, 0}).applied);
      for (std::size_t i = 0; i < n; ++i) {
        const double g = grad[i];
        e_m[i] = b1 * e_m[i] + 4 * u * (b1 * big_m[i] + (1 - b1) * std::fabs(g));
        e_v[i] = b2 * e_v[i] + 5 * u * (b2 * v[i] + (1 - b2) * g * g);
        big_m[i] = b1 * big_m[i] + (1 - b1) * std::fabs(g);
        v[i] = b2 * v[i] + (1 - b2) * g * g;
      }
    }
    std::vector<float> fast_m(n), fast_v(n);
    fast.read_buffer("m", fast_m);
    fast.read_buffer("v", fast_v);
    const auto buffers = ideal->buffers();
    ASSERT_EQ(buffers.size(), 2u);
    double worst_v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double slack = 1 + 0x1p-20;
      const double dm = abs(mpfr_real(fast_m[i]) - buffers[0].values[i]).convert_to<double>();
      const double dv = abs(mpfr_real(fast_v[i]) - buffers[1].values[i]).convert_to<double>();
      ASSERT_LE(dm, e_m[i] * slack) << beta1 << "/" << beta2 << " m[" << i << "]";
      ASSERT_LE(dv, e_v[i] * slack) << beta1 << "/" << beta2 << " v[" << i << "]: " << dv / v[i] << " relative";
      worst_v = std::max(worst_v, dv / buffers[1].values[i].convert_to<double>());
    }
    std::printf("betas %s %s: largest relative |v - v_reference| after %d steps %.3e\n", beta1.c_str(), beta2.c_str(),
                steps, worst_v);
  }
}

// The text complement itself: exact decimals, and the refusals.
TEST(BetaComplementRounding, DecimalComplementText) {
  using cgad::core::one_minus_decimal_text;
  EXPECT_EQ(one_minus_decimal_text("0.999", "b"), "0.001");
  EXPECT_EQ(one_minus_decimal_text("9.99e-1", "b"), "0.001");
  EXPECT_EQ(one_minus_decimal_text("0.1", "b"), "0.9");
  EXPECT_EQ(one_minus_decimal_text("1e-8", "b"), "0.99999999");
  EXPECT_EQ(one_minus_decimal_text("0", "b"), "1");
  EXPECT_EQ(one_minus_decimal_text("-0.0", "b"), "1");
  EXPECT_EQ(one_minus_decimal_text("1", "b"), "0");
  EXPECT_EQ(one_minus_decimal_text("100e-2", "b"), "0");
  EXPECT_EQ(one_minus_decimal_text("1e-99999", "b"), "1");
  for (const char* bad : {"1.5", "-0.1", "2", "inf", "nan", "0x1p-3", "", "0.9.9", "1e400"}) {
    EXPECT_THROW(one_minus_decimal_text(bad, "b"), cgad::core::InputError) << bad;
  }
}

// The message of the InputError that `run` throws ("" when it throws none).
template <typename Run>
std::string refusal(Run run) {
  try {
    run();
  } catch (const cgad::core::InputError& e) {
    return e.what();
  }
  return "";
}

// The β rule on the user's decimal (core/optimizer_options.hpp, parse_beta; docs/design.md §3): 0.99999999 and
// 0.999999999 (float 1.0f) are taken in cgad semantics, β1, β2 and the momentum alike, through fastpath::validate and
// the reference's configuration; bnb semantics, whose 1.0f − β would be 0, refuses them quoting the text, and 1,
// 1.0000001 and a decimal whose 1 − β is 0 in float are refused quoting the text. Before, each was "got 1".
TEST(BetaComplementRounding, BetaRuleIsOnTheDecimal) {
  using cgad::fastpath::Q8Semantics;
  for (const std::string decimal : {"0.99999999", "0.999999999"}) {
    StepConfig config;
    EXPECT_EQ(refusal([&] { config = config_of(decimal, Q8Semantics::cgad); }), "") << decimal;
    EXPECT_EQ(config.adam.beta2, 1.0f);
    EXPECT_EQ(refusal([&] { cgad::fastpath::validate(config); }), "") << decimal;
    cgad::core::OptimizerOptions adam;
    adam.beta1 = adam.beta2 = decimal;
    EXPECT_EQ(refusal([&] { cgad::core::optimizer_config<mpfr_real>(adam); }), "") << decimal;  // the reference
    cgad::core::OptimizerOptions nesterov;
    nesterov.optimizer = "nesterov";
    nesterov.momentum = decimal;
    EXPECT_EQ(refusal([&] { config = cgad::fastpath::fastpath_step_config(nesterov); }), "") << decimal;
    EXPECT_EQ(config.nesterov.momentum, 1.0f);
    EXPECT_EQ(refusal([&] { cgad::fastpath::validate(config); }), "") << decimal;
    EXPECT_LT(cgad::fastpath::reference_config<mpfr_real>(config).nesterov.momentum, mpfr_real(1)) << decimal;

    config = config_of(decimal, Q8Semantics::bnb);
    const std::string bnb = refusal([&] { cgad::fastpath::validate(config); });
    EXPECT_NE(bnb.find("got '" + decimal + "'"), std::string::npos) << bnb;
    EXPECT_NE(bnb.find("1.0f - beta"), std::string::npos) << bnb;
  }
  const std::string tiny_complement = "0." + std::string(50, '9');  // 1 − β = 1e-50, 0 in float
  for (const std::string& decimal : {std::string("1"), std::string("1.0000001"), std::string("1e0"), tiny_complement}) {
    for (const char* optimizer : {"adam", "nesterov"}) {
      cgad::core::OptimizerOptions options;
      options.optimizer = optimizer;
      (options.optimizer == "adam" ? options.beta2 : options.momentum) = decimal;
      const std::string message = refusal([&] { cgad::fastpath::fastpath_step_config(options); });
      EXPECT_NE(message.find("got '" + decimal + "'"), std::string::npos) << optimizer << ": " << message;
      EXPECT_EQ(message.find("got 1"), std::string::npos) << message;
    }
  }
}

// A configuration whose decimal does not read back to its float is refused.
TEST(BetaComplementRounding, DecimalMustReadBackToTheFloat) {
  StepConfig config;
  config.beta2_decimal = "0.99";  // adam.beta2 is 0.999f
  EXPECT_THROW(cgad::fastpath::validate(config), cgad::core::InputError);
  config.beta2_decimal = "0.99900000001";  // the same float
  EXPECT_NO_THROW(cgad::fastpath::validate(config));
}

}  // namespace
