#include "cgad/reference/real.hpp"

#include "cgad/reference/errors.hpp"

#include <boost/multiprecision/detail/digits.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
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

unsigned working_precision_bits() {
  return static_cast<unsigned>(boost::multiprecision::detail::digits10_2_2(mpfr_real::default_precision()));
}

namespace {

[[noreturn]] void refuse(std::string_view text, std::string_view what) {
  throw InputError(std::string(what) + ": '" + std::string(text) + "' is not a number");
}

template <class Hw>
Hw parse_hardware(std::string_view text, std::string_view what) {
  // from_chars rounds correctly to Hw in one step (no double rounding through double for float) and,
  // unlike strtod, does not depend on the locale.
  std::string_view body = text;
  if (!body.empty() && body.front() == '+') body.remove_prefix(1);
  Hw value{};
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (body.empty() || end != body.data() + body.size()) refuse(text, what);
  if (ec == std::errc::result_out_of_range) {
    throw InputError(std::string(what) + ": '" + std::string(text) + "' is out of range for this format");
  }
  if (ec != std::errc()) refuse(text, what);
  return value;
}

}  // namespace

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
  const std::string owned(text);
  mpfr_real value;
  char* end = nullptr;
  // Base 0 accepts decimal, "0x" hex-float, "inf" and "nan"; the result is correctly rounded to the
  // working precision, so a decimal hyperparameter never passes through double.
  mpfr_strtofr(value.backend().data(), owned.c_str(), &end, 0, MPFR_RNDN);
  // mpfr_strtofr skips leading white space; the hardware formats' parser does not, and neither do we.
  if (owned.empty() || std::isspace(static_cast<unsigned char>(owned.front())) || end != owned.c_str() + owned.size()) {
    refuse(text, what);
  }
  return value;
}

template <>
std::string to_decimal<double>(const double& x, unsigned digits) {
  char buffer[128];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::scientific,
                                    static_cast<int>(digits == 0 ? 0 : digits - 1));
  return std::string(buffer, result.ptr);
}
template <>
std::string to_decimal<float>(const float& x, unsigned digits) {
  return to_decimal(static_cast<double>(x), digits);
}
template <>
std::string to_decimal<mpfr_real>(const mpfr_real& x, unsigned digits) {
  if (!is_finite(x)) return boost::multiprecision::isnan(x) ? "nan" : (x < 0 ? "-inf" : "inf");
  return x.str(static_cast<std::streamsize>(digits), std::ios_base::scientific);
}

namespace {
template <class Hw>
std::string shortest(Hw x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}
}  // namespace

template <>
std::string to_decimal<float>(const float& x) {
  return shortest(x);
}
template <>
std::string to_decimal<double>(const double& x) {
  return shortest(x);
}
template <>
std::string to_decimal<mpfr_real>(const mpfr_real& x) {
  // p bits need 1 + ceil(p*log10 2) significant digits to read back exactly (Matula 1968).
  const unsigned bits = static_cast<unsigned>(mpfr_get_prec(x.backend().data()));
  return to_decimal(x, 1 + static_cast<unsigned>(std::ceil(bits * 0.30102999566398120)));
}

}  // namespace cgad::reference
