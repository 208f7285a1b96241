// bf16 rounding of the fast path against MPFR (CORE-MATH style: the candidate beside a reference that rounds
// once, bit patterns compared), and stochastic rounding's unbiasedness.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/detail/random_bits.hpp"

#include <gtest/gtest.h>
#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace cgad::fastpath {
namespace {

// x rounded to bf16 by MPFR: 8-bit precision, the binary32 exponent range, subnormals emulated
// (mpfr_subnormalize with emin = −125 − 8 + 1 = −132, MPFR's convention for an 8-bit format whose smallest
// normal is 2^−126), overflow to ±Inf by mpfr_check_range.
float mpfr_round_to_bf16(float x) {
  const mpfr_exp_t saved_emin = mpfr_get_emin();
  const mpfr_exp_t saved_emax = mpfr_get_emax();
  mpfr_set_emin(-132);
  mpfr_set_emax(128);
  mpfr_t y;
  mpfr_init2(y, 8);
  int ternary = mpfr_set_flt(y, x, MPFR_RNDN);
  ternary = mpfr_check_range(y, ternary, MPFR_RNDN);
  mpfr_subnormalize(y, ternary, MPFR_RNDN);
  const float rounded = mpfr_get_flt(y, MPFR_RNDN);
  mpfr_clear(y);
  mpfr_set_emin(saved_emin);
  mpfr_set_emax(saved_emax);
  return rounded;
}

std::uint32_t bits_of(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// Every bf16 value b, the float midpoint between b and its successor, and their float neighbours: the only
// inputs where round-to-nearest-even can go wrong (a wrong carry, a wrong tie), over the whole range,
// subnormals, the overflow threshold and both signs included.
TEST(FastpathBf16, NearestEvenMatchesMpfrAtEveryMidpointAndNeighbour) {
  constexpr std::uint32_t kLowHalves[] = {0x0000, 0x0001, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF};
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  for (std::uint32_t high = 0; high <= 0xFFFF; ++high) {
    for (const std::uint32_t low : kLowHalves) {
      const float x = std::bit_cast<float>((high << 16) | low);
      const float got = to_float(round_nearest_even_bf16(x));
      if (std::isnan(x)) {
        ASSERT_TRUE(std::isnan(got)) << std::hexfloat << x;
        ASSERT_EQ(bits_of(got) >> 31, bits_of(x) >> 31) << "NaN keeps its sign";
        continue;
      }
      const float want = mpfr_round_to_bf16(x);
      ++checked;
      if (bits_of(got) != bits_of(want)) {
        if (++mismatches <= 10) {
          ADD_FAILURE() << std::hexfloat << "x = " << x << ": got " << got << ", MPFR " << want;
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << checked;
  std::printf("bf16 RNE: %llu inputs checked against MPFR, %llu mismatches\n", static_cast<unsigned long long>(checked),
              static_cast<unsigned long long>(mismatches));
}

TEST(FastpathBf16, NearestEvenSpecialCases) {
  EXPECT_EQ(round_nearest_even_bf16(INFINITY).bits, 0x7F80);
  EXPECT_EQ(round_nearest_even_bf16(-INFINITY).bits, 0xFF80);
  EXPECT_EQ(round_nearest_even_bf16(-0.0f).bits, 0x8000);
  // The largest float rounds past the largest bf16 (0x7F7F) to +Inf, as IEEE overflow does.
  EXPECT_EQ(round_nearest_even_bf16(std::bit_cast<float>(0x7F7FFFFFu)).bits, 0x7F80);
  EXPECT_EQ(round_nearest_even_bf16(std::bit_cast<float>(0x7F7F7FFFu)).bits, 0x7F7F);
  EXPECT_TRUE(std::isnan(to_float(round_nearest_even_bf16(std::bit_cast<float>(0x7F800001u)))))
      << "a NaN whose payload lives in the low half must not become Inf";
}

// Exact unbiasedness of the rounding function itself: for a fixed x, over all 2^16 values of the random
// half-word, exactly r of them round up, where r is x's discarded low half — so E[round(x)] = x exactly when
// the 16 bits are uniform.
TEST(FastpathBf16, StochasticRoundsUpForExactlyTheDiscardedFraction) {
  constexpr std::uint32_t kHighHalves[] = {0x3F80, 0x3F81, 0xBF80, 0x0001, 0x8000, 0x7F00, 0x4049};
  constexpr std::uint32_t kLowHalves[] = {0x0000, 0x0001, 0x4000, 0x8000, 0xC000, 0xFFFF, 0x1234};
  for (const std::uint32_t high : kHighHalves) {
    for (const std::uint32_t low : kLowHalves) {
      const float x = std::bit_cast<float>((high << 16) | low);
      std::uint32_t ups = 0;
      for (std::uint32_t random = 0; random <= 0xFFFF; ++random) {
        const bf16 r = round_stochastic_bf16(x, random);
        ASSERT_TRUE(r.bits == high || r.bits == high + 1) << std::hexfloat << x;
        ups += r.bits == high + 1;
      }
      EXPECT_EQ(ups, low) << std::hexfloat << x;
    }
  }
}

// The Philox bits that drive it in the step: the fraction of round-ups over N = 2^20 draws keyed by
// (seed, step, index) must match p = r/2^16 within 6 standard deviations, sqrt(p(1−p)/N) each; for a fair
// generator the chance of a false failure is below 2·10^−9 per case (normal tail at 6σ).
TEST(FastpathBf16, StochasticRoundingWithPhiloxIsUnbiased) {
  constexpr std::uint64_t kDraws = 1u << 20;
  constexpr std::uint32_t kLowHalves[] = {0x0001, 0x1000, 0x8000, 0xB6DB, 0xFFFF};
  for (const std::uint32_t low : kLowHalves) {
    const float x = std::bit_cast<float>((0x3F80u << 16) | low);
    std::uint64_t ups = 0;
    for (std::uint64_t i = 0; i < kDraws; ++i) {
      const RandomWords words = philox_words(0x5EEDu, 1 + i / 4096, i % 4096);
      ups += round_stochastic_bf16(x, words.word[kWordParam]).bits == 0x3F81;
    }
    const double p = low / 65536.0;
    const double observed = static_cast<double>(ups) / kDraws;
    const double sigma = std::sqrt(p * (1 - p) / kDraws);
    std::printf("bf16 SR: low half %#06x p = %.8f observed %.8f (%.2f sigma)\n", low, p, observed,
                (observed - p) / sigma);
    EXPECT_LE(std::fabs(observed - p), 6 * sigma) << "low half " << low;
  }
}

}  // namespace
}  // namespace cgad::fastpath
