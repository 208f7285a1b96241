#include "cgad/reference/real.hpp"

#include "cgad/reference/errors.hpp"

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
    throw InputError("precision " + std::to_string(bits) + " bits is outside [" + std::to_string(kMinPrecisionBits) +
                     ", " + std::to_string(kMaxPrecisionBits) + "]");
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

namespace {

[[noreturn]] void refuse(std::string_view text, std::string_view what) {
  throw InputError(std::string(what) + ": '" + std::string(text) + "' is not a number");
}
[[noreturn]] void out_of_range(std::string_view text, std::string_view what) {
  throw InputError(std::string(what) + ": '" + std::string(text) + "' is out of range for this format");
}

bool digit(char c) {
  return c >= '0' && c <= '9';
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  }
  return true;
}

// The decimal exponent m of the first nonzero digit of a decimal of the grammar (sign already removed):
// 10^m <= |x| < 10^(m + 1); nothing for a zero mantissa. The text's exponent saturates at ±2^40, far past every
// format's range, so any length of exponent digits gives the right side of every range check made with m.
std::optional<long long> decimal_magnitude(std::string_view body) {
  bool seen_point = false, found = false;
  long long integer_digits = 0, zeros_after_point = 0;
  std::size_t i = 0;
  for (; i < body.size() && body[i] != 'e' && body[i] != 'E'; ++i) {
    const char c = body[i];
    if (c == '.') {
      seen_point = true;
      continue;
    }
    if (!found) {
      if (c != '0') {
        found = true;
      } else if (seen_point) {
        ++zeros_after_point;
      }
    }
    if (!seen_point && found) ++integer_digits;
  }
  if (!found) return std::nullopt;
  const long long lead = integer_digits > 0 ? integer_digits - 1 : -(zeros_after_point + 1);
  long long exponent = 0;
  if (i < body.size()) {
    ++i;
    bool negative = false;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) negative = body[i++] == '-';
    for (; i < body.size(); ++i) exponent = std::min<long long>(exponent * 10 + (body[i] - '0'), 1LL << 40);
    if (negative) exponent = -exponent;
  }
  return lead + exponent;
}

template <class Hw>
Hw parse_hardware(std::string_view text, std::string_view what) {
  const NumberText kind = classify_number_text(text);
  if (kind == NumberText::invalid) refuse(text, what);
  const bool negative = text.front() == '-';
  if (kind == NumberText::infinity) {
    return negative ? -std::numeric_limits<Hw>::infinity() : std::numeric_limits<Hw>::infinity();
  }
  if (kind == NumberText::nan) return std::copysign(std::numeric_limits<Hw>::quiet_NaN(), negative ? Hw(-1) : Hw(1));
  // from_chars rounds correctly to Hw in one step (no double rounding through double for float) and, unlike
  // strtod, does not depend on the locale. It takes no '+' sign.
  std::string_view body = text;
  if (body.front() == '+' || body.front() == '-') body.remove_prefix(1);
  Hw value{};
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (end != body.data() + body.size()) refuse(text, what);
  if (ec == std::errc::result_out_of_range) {
    // Below half the smallest subnormal: the correctly rounded value is zero, of the text's sign.
    if (const auto m = decimal_magnitude(body); m && *m < 0) return negative ? -Hw(0) : Hw(0);
    out_of_range(text, what);
  }
  if (ec != std::errc()) refuse(text, what);
  return negative ? -value : value;
}

}  // namespace

NumberText classify_number_text(std::string_view text) {
  std::string_view body = text;
  if (!body.empty() && (body.front() == '+' || body.front() == '-')) body.remove_prefix(1);
  if (equal_ignoring_case(body, "inf") || equal_ignoring_case(body, "infinity")) return NumberText::infinity;
  if (equal_ignoring_case(body, "nan")) return NumberText::nan;
  std::size_t i = 0, mantissa_digits = 0;
  while (i < body.size() && digit(body[i])) ++i, ++mantissa_digits;
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && digit(body[i])) ++i, ++mantissa_digits;
  }
  if (mantissa_digits == 0) return NumberText::invalid;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    const std::size_t first = i;
    while (i < body.size() && digit(body[i])) ++i;
    if (i == first) return NumberText::invalid;
  }
  return i == body.size() ? NumberText::decimal : NumberText::invalid;
}

template <>
float parse_real<float>(std::string_view text, std::string_view what) {
  return parse_hardware<float>(text, what);
}
template <>
double parse_real<double>(std::string_view text, std::string_view what) {
  return parse_hardware<double>(text, what);
}
template <>
mpfr_real parse_real<mpfr_real>(std::string_view text, std::string_view what) {
  const NumberText kind = classify_number_text(text);
  if (kind == NumberText::invalid) refuse(text, what);
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
  if (const auto m = decimal_magnitude(body)) {
    const double log10_2 = 0.30102999566398120;
    if (*m < static_cast<double>(mpfr_get_emin() - 1) * log10_2 - 2) {
      mpfr_set_zero(value.backend().data(), negative ? -1 : 1);
      return value;
    }
    if (*m > static_cast<double>(mpfr_get_emax()) * log10_2 + 2) out_of_range(text, what);
  }
  const std::string owned(text);
  char* end = nullptr;
  // Base 10 and the grammar checked above: correctly rounded to the working precision, so a decimal
  // hyperparameter never passes through double.
  mpfr_strtofr(value.backend().data(), owned.c_str(), &end, 10, MPFR_RNDN);
  if (end != owned.c_str() + owned.size()) refuse(text, what);
  if (!is_finite(value)) out_of_range(text, what);  // past MPFR's exponent range (about 10^(3*10^8))
  return value;
}

namespace {
// The hardware formats' renderings: `digits` significant digits in scientific notation, and the shortest decimal
// that reads back to the same value.
template <class Hw>
std::string scientific(Hw x, unsigned digits) {
  char buffer[128];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::scientific,
                                    static_cast<int>(digits == 0 ? 0 : digits - 1));
  return std::string(buffer, result.ptr);
}
template <class Hw>
std::string shortest(Hw x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}
}  // namespace

template <>
std::string to_decimal<double>(const double& x, unsigned digits) {
  return scientific(x, digits);
}
template <>
std::string to_decimal<float>(const float& x, unsigned digits) {
  return to_decimal(static_cast<double>(x), digits);
}
template <>
std::string to_decimal<long double>(const long double& x, unsigned digits) {
  return scientific(x, digits);
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
std::string to_decimal<float>(const float& x) {
  return shortest(x);
}
template <>
std::string to_decimal<double>(const double& x) {
  return shortest(x);
}
template <>
std::string to_decimal<long double>(const long double& x) {
  return shortest(x);
}
template <>
std::string to_decimal<mpfr_real>(const mpfr_real& x) {
  // p bits need 1 + ceil(p*log10 2) significant digits to read back exactly (Matula 1968).
  const unsigned bits = static_cast<unsigned>(mpfr_get_prec(x.backend().data()));
  return to_decimal(x, 1 + static_cast<unsigned>(std::ceil(bits * 0.30102999566398120)));
}

}  // namespace cgad::reference
