#include "cgad/reference/real.hpp"

#include "cgad/core/detail/number_text.hpp"
#include "cgad/core/errors.hpp"

#include <boost/multiprecision/detail/digits.hpp>

#include <cctype>
#include <charconv>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace cgad::reference {

unsigned set_working_precision_bits(unsigned bits) {
  if (bits < kMinPrecisionBits || bits > kMaxPrecisionBits) {
    throw core::InputError("precision " + std::to_string(bits) + " bits is outside [" +
                           std::to_string(kMinPrecisionBits) + ", " + std::to_string(kMaxPrecisionBits) + "]");
  }
  // Boost maps d decimal digits to digits10_2_2(d) bits; it is increasing in d, so walk up to the first d
  // that reaches `bits` (at most a few steps past bits*log10(2)).
  unsigned digits10 = static_cast<unsigned>(std::floor(bits * 0.30102999566398120)) - 1;
  while (boost::multiprecision::detail::digits10_2_2(digits10) < bits) ++digits10;
  mpfr_real::default_precision(digits10);
  return working_precision_bits();
}

void release_mpfr_caches_at_thread_exit() {
  struct Release {
    ~Release() { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }
  };
  thread_local Release release;
  (void)release;
}

unsigned working_precision_bits() {
  return static_cast<unsigned>(boost::multiprecision::detail::digits10_2_2(mpfr_real::default_precision()));
}

}  // namespace cgad::reference

// The reference's scalar in core's parse and print functions (core/include/cgad/core/real_scalar.hpp).
namespace cgad::core {

using reference::mpfr_real;

template <>
mpfr_real parse_real<mpfr_real>(std::string_view text, std::string_view what) {
  const NumberText kind = core::classify_number_text(text);
  if (kind == NumberText::invalid) core::refuse_number_text(text, what);
  const bool negative = text.front() == '-';
  mpfr_real value;
  if (kind == NumberText::infinity) {
    mpfr_set_inf(value.backend().data(), negative ? -1 : 1);
    return value;
  }
  if (kind == NumberText::nan) {
    mpfr_set_nan(value.backend().data());
    return value;
  }
  // MPFR 4.2.0's mpfr_strtofr returns +Inf for a tiny decimal whose exponent does not fit a long when its mantissa
  // has zeros after the point ("0.05e-6000…0006847772", 58 exponent digits; found by fuzz/fuzz_decimal_number.cpp):
  // the exponent saturates and the count of those zeros then wraps it. So a decimal whose magnitude lies far outside
  // MPFR's exponent range is decided here: below it, the correctly rounded value is zero of the text's sign (as for
  // the hardware formats); above it, out of range. Inside, every exponent the text can carry fits a long.
  std::string_view body = text;
  if (body.front() == '+' || body.front() == '-') body.remove_prefix(1);
  if (const auto m = core::decimal_magnitude(body)) {
    const double log10_2 = 0.30102999566398120;
    if (*m < static_cast<double>(mpfr_get_emin() - 1) * log10_2 - 2) {
      mpfr_set_zero(value.backend().data(), negative ? -1 : 1);
      return value;
    }
    if (*m > static_cast<double>(mpfr_get_emax()) * log10_2 + 2) core::refuse_out_of_range(text, what);
  }
  const std::string owned(text);
  char* end = nullptr;
  // Base 10 and the grammar checked above: correctly rounded to the working precision, so a decimal
  // hyperparameter never passes through double.
  mpfr_strtofr(value.backend().data(), owned.c_str(), &end, 10, MPFR_RNDN);
  if (end != owned.c_str() + owned.size()) core::refuse_number_text(text, what);
  if (!is_finite(value)) core::refuse_out_of_range(text, what);  // past MPFR's exponent range (about 10^(3*10^8))
  return value;
}
template <>
std::string to_decimal<mpfr_real>(const mpfr_real& x, unsigned digits) {
  if (!is_finite(x)) return boost::multiprecision::isnan(x) ? "nan" : (x < 0 ? "-inf" : "inf");
  // Boost's str(d, scientific) prints d digits after the leading one, d + 1 significant: ask for one fewer. (It
  // printed one digit more than promised until 2026-12-01, so `cgad gate` showed 75 digits where 74 are meaningful.)
  const std::string text = x.str(static_cast<std::streamsize>(digits == 0 ? 0 : digits - 1), std::ios_base::scientific);
  // Boost prints -0 without its sign; the hardware formats keep it, and so must the reference.
  if (mpfr_zero_p(x.backend().data()) && mpfr_signbit(x.backend().data()) && text.front() != '-') {
    std::string negative(1, '-');
    negative.append(text);
    return negative;
  }
  return text;
}

template <>
std::string to_decimal<mpfr_real>(const mpfr_real& x) {
  // p bits need 1 + ceil(p*log10 2) significant digits to read back exactly (Matula 1968).
  const unsigned bits = static_cast<unsigned>(mpfr_get_prec(x.backend().data()));
  return to_decimal(x, 1 + static_cast<unsigned>(std::ceil(bits * 0.30102999566398120)));
}
template <>
std::string show<mpfr_real>(const mpfr_real& x) {
  return to_decimal(x, 20);
}

}  // namespace cgad::core
