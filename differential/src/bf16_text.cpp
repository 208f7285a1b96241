#include "cgad/differential/bf16_text.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/core/real_scalar.hpp"

#include <mpfr.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace cgad::differential {

using fastpath::bf16;
using fastpath::round_nearest_even_bf16;

namespace {

// bf16 has 8 significant bits and float's exponent range: the largest finite value is (2 − 2^-7)·2^127 =
// 0.11111111₂·2^128 and the smallest subnormal 2^-133 = 0.1₂·2^-132, in MPFR's [1/2, 1) convention.
constexpr mpfr_prec_t kBf16Bits = 8;
constexpr mpfr_exp_t kBf16Emin = -132;
constexpr mpfr_exp_t kBf16Emax = 128;

// Sets MPFR's exponent range to bf16's for its lifetime (MPFR's range is process-global).
class Bf16ExponentRange {
 public:
  Bf16ExponentRange() : emin_(mpfr_get_emin()), emax_(mpfr_get_emax()) {
    mpfr_set_emin(kBf16Emin);
    mpfr_set_emax(kBf16Emax);
  }
  ~Bf16ExponentRange() {
    mpfr_set_emin(emin_);
    mpfr_set_emax(emax_);
  }
  Bf16ExponentRange(const Bf16ExponentRange&) = delete;
  Bf16ExponentRange& operator=(const Bf16ExponentRange&) = delete;

 private:
  mpfr_exp_t emin_, emax_;
};

}  // namespace

namespace {

// A decimal of the grammar, correctly rounded to bf16 -- to ±Inf past its range (the caller decides whether that
// is allowed); false if `text` is not such a decimal.
bool round_decimal_to_bf16(const std::string& text, float& value) {
  if (core::classify_number_text(text) != core::NumberText::decimal) return false;
  Bf16ExponentRange range;
  mpfr_t x;
  mpfr_init2(x, kBf16Bits);
  char* end = nullptr;
  const int inexact = mpfr_strtofr(x, text.c_str(), &end, 10, MPFR_RNDN);
  const bool complete = end == text.c_str() + text.size();
  mpfr_subnormalize(x, inexact, MPFR_RNDN);  // gradual underflow below 2^-126, as bf16 stores it
  value = mpfr_get_flt(x, MPFR_RNDN);        // exact: every bf16 is a float
  mpfr_clear(x);
  return complete;
}

}  // namespace

bf16 parse_bf16(std::string_view text, std::string_view what) {
  const std::string owned(text);
  // The one number grammar (core::classify_number_text), as for every other format: no hexadecimal, no
  // white space, no NaN payload.
  const core::NumberText kind = core::classify_number_text(owned);
  if (kind == core::NumberText::invalid) {
    throw core::InputError(std::string(what) + ": '" + owned + "' is not a number");
  }
  if (kind != core::NumberText::decimal) {
    return round_nearest_even_bf16(core::parse_real<float>(owned, what));  // ±inf, nan
  }
  float value = 0;
  if (!round_decimal_to_bf16(owned, value)) {
    throw core::InputError(std::string(what) + ": '" + owned + "' is not a number");
  }
  // A decimal past bf16's largest finite value rounds to infinity: refused, as float refuses "1e39", rather than
  // silently stored as +Inf.
  if (!std::isfinite(value)) {
    throw core::InputError(std::string(what) + ": '" + owned + "' is out of range for this format");
  }
  // The float holds a bf16 value exactly, so its top 16 bits are that bf16 (the low 16 are zero).
  return round_nearest_even_bf16(value);
}

std::string bf16_to_decimal(bf16 value) {
  const float x = to_float(value);
  if (!std::isfinite(x)) return core::to_decimal(x);
  // 1 to 9 significant digits: 9 always suffice for a float, hence for any bf16.
  for (int digits = 1; digits <= 9; ++digits) {
    char text[48];
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(x));
    float back = 0;
    if (round_decimal_to_bf16(text, back) && round_nearest_even_bf16(back).bits == value.bits) return text;
  }
  return core::to_decimal(x);
}

}  // namespace cgad::differential
