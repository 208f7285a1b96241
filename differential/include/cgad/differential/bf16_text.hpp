#pragma once
// Decimal text to and from bf16, each correctly rounded once: parsing goes through MPFR at bf16's own
// precision and exponent range, so "0.1" becomes the bf16 nearest to 0.1 (not the bf16 nearest to the float
// nearest to 0.1 — the two differ when the float lands on a bf16 midpoint), and printing gives the shortest
// decimal that parses back to the same bf16.
#include "cgad/fastpath/bf16.hpp"

#include <string>
#include <string_view>

namespace cgad::differential {

fastpath::bf16 parse_bf16(std::string_view text, std::string_view what);
std::string bf16_to_decimal(fastpath::bf16 value);

}  // namespace cgad::differential
