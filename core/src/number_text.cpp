// The number grammar and the hardware formats' parsing and printing (real_scalar.hpp); the reference's MPFR
// versions are in reference/src/precision.cpp, on the same grammar and the same helpers (detail/number_text.hpp).
#include "cgad/core/detail/number_text.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/real_scalar.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace cgad::core {

[[noreturn]] void refuse_number_text(std::string_view text, std::string_view what) {
  throw InputError(std::string(what) + ": '" + std::string(text) + "' is not a number");
}
[[noreturn]] void refuse_out_of_range(std::string_view text, std::string_view what) {
  throw InputError(std::string(what) + ": '" + std::string(text) + "' is out of range for this format");
}

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

namespace {

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

template <class Hw>
Hw parse_hardware(std::string_view text, std::string_view what) {
  const NumberText kind = classify_number_text(text);
  if (kind == NumberText::invalid) refuse_number_text(text, what);
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
  if (end != body.data() + body.size()) refuse_number_text(text, what);
  if (ec == std::errc::result_out_of_range) {
    // Below half the smallest subnormal: the correctly rounded value is zero, of the text's sign.
    if (const auto m = decimal_magnitude(body); m && *m < 0) return negative ? -Hw(0) : Hw(0);
    refuse_out_of_range(text, what);
  }
  if (ec != std::errc()) refuse_number_text(text, what);
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
std::string show<float>(const float& x) {
  return to_decimal(x);
}
template <>
std::string show<double>(const double& x) {
  return to_decimal(x);
}
template <>
std::string show<long double>(const long double& x) {
  return to_decimal(x);
}

}  // namespace cgad::core
