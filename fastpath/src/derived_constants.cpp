#include "cgad/fastpath/detail/derived_constants.hpp"

#include "cgad/core/decimal_complement.hpp"

#include <string>

namespace cgad::fastpath {
namespace {

struct OneBeta {
  float one_minus = 0;
  double hi = 0, lo = 0;
};

OneBeta from_decimal(const std::string& decimal, const char* name) {
  OneBeta b;
  b.one_minus = core::one_minus_decimal<float>(decimal, name);
  const double c = core::one_minus_decimal<double>(decimal, name);
  // 1 − c exactly, as hi + lo: Fast2Sum applies since 1 ≥ c ≥ 0 (built with -ffp-contract=off).
  b.hi = 1.0 - c;
  b.lo = (1.0 - b.hi) - c;
  return b;
}

OneBeta from_float(float beta) {
  // 1.0f − β in float is correctly rounded, and so is 1 − β in double rounded to float: for β ≥ 2^-29 the double
  // difference is exact, below it both round to 1.
  return {static_cast<float>(1.0 - static_cast<double>(beta)), static_cast<double>(beta), 0.0};
}

}  // namespace

BetaConstants beta_constants(const StepConfig& config) {
  OneBeta b1, b2;
  if (config.q8_semantics == Q8Semantics::bnb) {
    b1 = from_float(config.adam.beta1);
    b2 = from_float(config.adam.beta2);
  } else {
    const BetaDecimals decimals = beta_decimals(config);
    b1 = from_decimal(decimals.beta1, "beta1");
    b2 = from_decimal(decimals.beta2, "beta2");
  }
  return {b1.one_minus, b2.one_minus, b1.hi, b1.lo, b2.hi, b2.lo};
}

}  // namespace cgad::fastpath
