#pragma once
// bfloat16 storage: the top 16 bits of an IEEE binary32 (1 sign, 8 exponent, 7 fraction bits), so widening
// to float is exact and narrowing is one rounding of the low 16 bits.
//
// Round-to-nearest-even adds 0x7FFF plus the kept lsb and truncates: below the midpoint the carry never
// reaches bit 16, above it always does, and exactly at the midpoint it does iff the kept lsb is 1 (ties to
// even). Overflow past the largest finite bf16 carries into the exponent and yields ±Inf, as IEEE rounding
// does; the carry out of the largest subnormal yields the smallest normal, also as IEEE does.
//
// Stochastic rounding adds 16 uniform random bits and truncates: a value whose low 16 bits are r rounds up
// with probability exactly r/2^16, so E[round(x)] = x for every finite x whose rounding does not overflow
// (Connolly, Higham & Mary, "Stochastic rounding and its probabilistic backward error analysis", 2021).
// NaN stays NaN (quieted, sign kept) under both modes; ±Inf stays ±Inf (its low 16 bits are zero and the
// added bits never carry).
#include "cgad/fastpath/portable.hpp"

#include <cstdint>

namespace cgad::fastpath {

struct bf16 {
  std::uint16_t bits = 0;
};

CGAD_HD inline float to_float(bf16 x) {
  return bits_to_float(static_cast<std::uint32_t>(x.bits) << 16);
}

CGAD_HD inline bool is_nan_bits(std::uint32_t u) {
  return (u & 0x7FFFFFFFu) > 0x7F800000u;
}

CGAD_HD inline bf16 quiet_nan_bf16(std::uint32_t u) {
  return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
}

CGAD_HD inline bf16 round_nearest_even_bf16(float x) {
  const std::uint32_t u = float_to_bits(x);
  if (is_nan_bits(u)) return quiet_nan_bf16(u);
  const std::uint32_t kept_lsb = (u >> 16) & 1u;
  return bf16{static_cast<std::uint16_t>((u + 0x7FFFu + kept_lsb) >> 16)};
}

// `random` supplies the 16 random bits in its low half.
CGAD_HD inline bf16 round_stochastic_bf16(float x, std::uint32_t random) {
  const std::uint32_t u = float_to_bits(x);
  if (is_nan_bits(u)) return quiet_nan_bf16(u);
  return bf16{static_cast<std::uint16_t>((u + (random & 0xFFFFu)) >> 16)};
}

}  // namespace cgad::fastpath
