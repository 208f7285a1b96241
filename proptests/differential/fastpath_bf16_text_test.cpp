// Decimal text to bf16 and back (differential/bf16_text.hpp): one correct rounding in, the shortest round trip out.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "cgad/differential/bf16_text.hpp"

#include "cgad/core/errors.hpp"

#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdio>

namespace {

using cgad::differential::bf16_to_decimal;
using cgad::differential::parse_bf16;
namespace fp = cgad::fastpath;

// Every finite bf16 prints to a decimal that parses back to the same bits, and no shorter decimal would.
TEST(Bf16Text, EveryFiniteValueRoundTripsThroughItsShortestDecimal) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const fp::bf16 x{static_cast<std::uint16_t>(bits)};
    if (!std::isfinite(fp::to_float(x))) continue;
    const std::string text = bf16_to_decimal(x);
    ASSERT_EQ(parse_bf16(text, "x").bits, x.bits) << std::hex << bits << " printed as " << text;
  }
}

// A decimal whose nearest float is a bf16 midpoint but which is not itself one: rounding through float first
// ties to even, rounding once goes to the nearer neighbour. 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7;
// 1 + 2^-8 + 2^-30 lies above it, its nearest float is the midpoint (float spacing there is 2^-23), and its
// nearest bf16 is 1 + 2^-7.
TEST(Bf16Text, ParsesWithOneRoundingNotTwo) {
  const char* just_above_midpoint = "1.00390625093132257461547851562";                              // 1 + 2^-8 + 2^-30
  EXPECT_EQ(fp::round_nearest_even_bf16(std::strtof(just_above_midpoint, nullptr)).bits, 0x3F80u);  // via float: 1
  EXPECT_EQ(parse_bf16(just_above_midpoint, "x").bits, 0x3F81u);                                    // once: 1 + 2^-7
  EXPECT_EQ(parse_bf16("1.00390625", "x").bits, 0x3F80u);  // the midpoint itself ties to even
  EXPECT_EQ(parse_bf16("-0", "x").bits, 0x8000u);
  // Past the largest finite bf16 is refused (it became +Inf silently, where fp32 refuses it);
  // infinity must be written as such.
  EXPECT_THROW(parse_bf16("1e39", "x"), cgad::core::InputError);
  EXPECT_THROW(parse_bf16("-3.4e38", "x"), cgad::core::InputError);
  EXPECT_EQ(parse_bf16("3.39e38", "x").bits, 0x7F7Fu);  // rounds to the largest finite bf16, 3.3895e38
  EXPECT_EQ(parse_bf16("inf", "x").bits, 0x7F80u);
  EXPECT_EQ(parse_bf16("-Infinity", "x").bits, 0xFF80u);
  EXPECT_EQ(parse_bf16("9.2e-41", "x").bits, 0x0001u);  // 2^-133, the smallest subnormal, is 9.18e-41
  EXPECT_EQ(parse_bf16("1e-50", "x").bits, 0x0000u);
  // The one number grammar (item 28): no hexadecimal or binary, no payload, no white space.
  for (const char* bad : {"", " 1", "1x", "abc", "0x1p-3", "0b101", "nan(1)", "1 ", "@inf@", "1e", "."}) {
    EXPECT_THROW(parse_bf16(bad, "x"), cgad::core::InputError) << bad;
  }
}

// Random decimals over bf16's normal range, against an independent route: the float nearest to the decimal
// (MPFR at 200 bits, then one rounding to float), rounded to bf16. That route rounds twice, so it can only be
// trusted when the float does not land exactly on a bf16 midpoint (low half 0x8000); everywhere else the two
// must agree.
RC_GTEST_PROP(Bf16Text, AgreesWithRoundingThroughFloatAwayFromMidpoints, ()) {
  const double mantissa = *rc::gen::inRange(-999999999, 1000000000) / 1e8;
  const int exponent = *rc::gen::inRange(-37, 38);
  char text[64];
  std::snprintf(text, sizeof text, "%.9fe%d", mantissa, exponent);
  mpfr_t wide;
  mpfr_init2(wide, 200);
  mpfr_set_str(wide, text, 10, MPFR_RNDN);
  const float as_float = mpfr_get_flt(wide, MPFR_RNDN);
  mpfr_clear(wide);
  const std::uint32_t low = std::bit_cast<std::uint32_t>(as_float) & 0xFFFFu;
  RC_PRE(low != 0x8000u && (as_float == 0 || std::fabs(as_float) >= 0x1p-126f));
  RC_ASSERT(fp::round_nearest_even_bf16(as_float).bits == parse_bf16(text, "x").bits);
}

}  // namespace
