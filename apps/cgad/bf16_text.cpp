#include "bf16_text.hpp"

#include "cgad/reference/errors.hpp"
#include "cgad/reference/real.hpp"

#include <mpfr.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace cgad::cli {
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

fastpath::bf16 parse_bf16(std::string_view text, std::string_view what) {
  const std::string owned(text);
  if (owned.empty() || std::isspace(static_cast<unsigned char>(owned.front()))) {
    throw reference::InputError(std::string(what) + ": '" + owned + "' is not a number");
  }
  float value = 0;
  {
    Bf16ExponentRange range;
    mpfr_t x;
    mpfr_init2(x, kBf16Bits);
    char* end = nullptr;
    const int inexact = mpfr_strtofr(x, owned.c_str(), &end, 0, MPFR_RNDN);
    const bool complete = end == owned.c_str() + owned.size();
    mpfr_subnormalize(x, inexact, MPFR_RNDN);  // gradual underflow below 2^-126, as bf16 stores it
    value = mpfr_get_flt(x, MPFR_RNDN);        // exact: every bf16 is a float
    mpfr_clear(x);
    if (!complete) throw reference::InputError(std::string(what) + ": '" + owned + "' is not a number");
  }
  // The float holds a bf16 value exactly, so its top 16 bits are that bf16 (the low 16 are zero).
  return fastpath::round_nearest_even_bf16(value);
}

std::string bf16_to_decimal(fastpath::bf16 value) {
  const float x = fastpath::to_float(value);
  if (!std::isfinite(x)) return reference::to_decimal(x);
  // 1 to 9 significant digits: 9 always suffice for a float, hence for any bf16.
  for (int digits = 1; digits <= 9; ++digits) {
    char text[48];
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(x));
    if (parse_bf16(text, "bf16").bits == value.bits) return text;
  }
  return reference::to_decimal(x);
}

}  // namespace cgad::cli
