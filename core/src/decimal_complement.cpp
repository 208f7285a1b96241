#include "cgad/core/decimal_complement.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

namespace cgad::core {
namespace {

[[noreturn]] void refuse_outside_unit_interval(std::string_view text, std::string_view what) {
  throw InputError(std::string(what) + ": 1 - x needs a decimal x in [0, 1], got '" + std::string(text) + "'");
}

}  // namespace

std::string one_minus_decimal_text(std::string_view text, std::string_view what) {
  if (classify_number_text(text) != NumberText::decimal) refuse_outside_unit_interval(text, what);
  std::size_t i = 0;
  const bool negative = text[i] == '-';
  if (text[i] == '+' || text[i] == '-') ++i;
  // x = digits · 10^exponent, digits an integer written without its point.
  std::string digits;
  long long exponent = 0;
  bool after_point = false;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      after_point = true;
      continue;
    }
    digits.push_back(text[i]);
    if (after_point) --exponent;
  }
  if (i < text.size()) {
    ++i;
    const bool negative_exponent = text[i] == '-';
    if (text[i] == '+' || text[i] == '-') ++i;
    long long written = 0;
    // Clamped far past any exponent that matters: 10^(2^40) is 1 − x = −Inf, 10^(−2^40) gives "1" below.
    for (; i < text.size(); ++i) written = std::min<long long>(written * 10 + (text[i] - '0'), 1LL << 40);
    exponent += negative_exponent ? -written : written;
  }
  digits.erase(0, digits.find_first_not_of('0'));
  if (digits.empty()) return "1";  // x = 0 (or −0)
  if (negative) refuse_outside_unit_interval(text, what);
  while (digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  const auto size = static_cast<long long>(digits.size());
  // x ∈ [10^(size − 1 + exponent), 10^(size + exponent)).
  if (exponent >= 0) {
    if (digits == "1" && exponent == 0) return "0";
    refuse_outside_unit_interval(text, what);
  }
  const long long places = -exponent;  // x = digits / 10^places, and x < 1 iff size ≤ places
  if (size > places) refuse_outside_unit_interval(text, what);
  if (size - places < -40) return "1";
  // 10^places − digits, as `places` decimal digits: the nines' complement of digits (padded), plus one.
  std::string complement(static_cast<std::size_t>(places - size), '9');
  for (char c : digits) complement.push_back(static_cast<char>('9' - (c - '0')));
  for (std::size_t k = complement.size(); k-- > 0;) {  // + 1; digits ≠ 0, so the carry stops inside
    if (complement[k] != '9') {
      ++complement[k];
      break;
    }
    complement[k] = '0';
  }
  return "0." + complement;
}

}  // namespace cgad::core
