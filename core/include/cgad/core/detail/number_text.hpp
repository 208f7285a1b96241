#pragma once
// What core's parser of the number grammar shares with the reference's MPFR parser (reference/src/precision.cpp):
// the refusals' wording and the decimal magnitude that decides a range before any digit is converted.
#include <optional>
#include <string_view>

namespace cgad::core {

// InputError "<what>: '<text>' is not a number".
[[noreturn]] void refuse_number_text(std::string_view text, std::string_view what);
// InputError "<what>: '<text>' is out of range for this format".
[[noreturn]] void refuse_out_of_range(std::string_view text, std::string_view what);

// The decimal exponent m of the first nonzero digit of a decimal of the grammar, sign already removed:
// 10^m <= |x| < 10^(m + 1); nothing for a zero mantissa. The text's exponent saturates at ±2^40, far past every
// format's range, so any length of exponent digits gives the right side of every range check made with m.
std::optional<long long> decimal_magnitude(std::string_view body);

}  // namespace cgad::core
