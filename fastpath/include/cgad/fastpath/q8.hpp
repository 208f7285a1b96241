#pragma once
// Blockwise dynamic 8-bit quantization of optimizer state (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", ICLR 2022): the state is cut into blocks of 256 elements; each block stores its absolute
// maximum as an fp32 and every element as the index of the code nearest to value/absmax in a fixed
// 256-entry map. The maps are bitsandbytes' dynamic maps (q8_maps.hpp says exactly which).
//
// Nearest rounding is the exact argmin over the map: the index is the number of midpoints between
// consecutive codes that lie strictly below x. The midpoints are exact in double (the mean of two floats of
// the map: their exponents differ by far less than 29). The search compares floats, against each midpoint
// rounded DOWN to a float, t = max{float f : f ≤ m}: for a float x, m < x ⟺ t < x (if m is a float, t = m;
// if not, no float lies in [t, m], so x > t ⟺ x ≥ succ(t) > m). So no rounding can move a decision. Ties
// (x exactly on a midpoint) go to the LOWER code, the one nearer −∞. NaN compares false everywhere and maps to
// index 0; ±Inf map to the last/first code. The count is a branchless binary search (8 compares, a select per
// level), which vectorizes on the CPU and does not diverge on the GPU.
//
// Stochastic rounding picks between the two codes c_lo ≤ x ≤ c_hi around x, rounding up with probability
// ⌈2^24·(x − c_lo)/(c_hi − c_lo)⌉/2^24: the comparison u·(c_hi − c_lo) < x − c_lo with u = k·2^-24 is exact
// in double (a 24-bit k times a gap of at most 25 significant bits), so the only bias is that ≤ 2^-24
// quantization of the probability. Values outside [code[0], code[255]] clamp to the end codes.
#include "cgad/fastpath/portable.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::fastpath {

inline constexpr std::size_t kQ8BlockSize = 256;
inline constexpr int kQ8Codes = 256;

struct Q8Map {
  float code[kQ8Codes];        // strictly increasing
  double midpoint[kQ8Codes];   // midpoint[k] = (code[k] + code[k+1]) / 2 exactly; midpoint[255] = +Inf
  float threshold[kQ8Codes];   // midpoint[k] rounded down to a float; threshold[255] = +Inf
};

CGAD_HD inline std::uint8_t q8_nearest(float x, const Q8Map& map) {
  unsigned position = 0;
  for (unsigned half = kQ8Codes / 2; half != 0; half >>= 1) {
    position += map.threshold[position + half - 1] < x ? half : 0u;
  }
  return static_cast<std::uint8_t>(position);
}

// `random`'s top 24 bits are the uniform variate.
CGAD_HD inline std::uint8_t q8_stochastic(float x, const Q8Map& map, std::uint32_t random) {
  const int nearest = q8_nearest(x, map);
  int low = map.code[nearest] > x ? nearest - 1 : nearest;
  low = low < 0 ? 0 : (low > kQ8Codes - 2 ? kQ8Codes - 2 : low);
  const double below = static_cast<double>(x) - static_cast<double>(map.code[low]);
  const double gap = static_cast<double>(map.code[low + 1]) - static_cast<double>(map.code[low]);
  const double u = static_cast<double>(random >> 8) * 0x1p-24;
  return static_cast<std::uint8_t>(u * gap < below ? low + 1 : low);
}

CGAD_HD inline float q8_dequantize(std::uint8_t index, float absmax, const Q8Map& map) {
  return map.code[index] * absmax;
}

// The value a block's quantizer sees: value/absmax, and 0 for an all-zero block (absmax = 0), where the
// division would give NaN. |value| ≤ absmax makes the quotient lie in [−1, 1] exactly.
CGAD_HD inline float q8_normalize(float value, float absmax) { return absmax == 0.0f ? 0.0f : value / absmax; }

}  // namespace cgad::fastpath
