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
// (x exactly on a midpoint) go to the LOWER code, the one nearer −∞. NaN maps to index 0; ±Inf map to the
// last/first code.
//
// The count is found without a search: x's bucket — its sign and its magnitude's bits, clamped to
// [2^-23, 1] and cut after kQ8BucketFractionBits fraction bits — indexes a table holding the number of
// thresholds below every float of the bucket; the map is built (q8_maps.cpp) so that at most
// kQ8BucketSearch thresholds fall inside any bucket's range, and those are counted with that many compares:
// count = below + Σ_{j < kQ8BucketSearch} [threshold[below + j] < x]. That is exact, not an approximation:
// thresholds are sorted, those before `below` are under every float of the bucket and those after the
// bucket's last float are over x. The clamp is safe because no threshold lies in (−2^-23, 2^-23) or in
// (1, +Inf) (checked when the map is built). Integer ops and two table reads, no data-dependent branch:
// it vectorizes on the CPU (gathers) and does not diverge on the GPU.
//
// The line model (q8_nearest_fast): the same index without the two table reads, for the maps of q8_maps.hpp. Each
// side of zero is 7 groups of codes, group g spanning one decade with its codes means of a linspace (q8_maps.hpp),
// so its thresholds lie almost exactly on a line. For |x| clamped to 1:
//   G = the number of group boundaries (the thresholds below each group's first code, and below the code 1)
//       strictly below |x| — exact integer compares of bit patterns with the map's own thresholds;
//   pos = |x|·k_g − c_g in float (g = G − 1), the line through the group's internal thresholds, which puts the
//       j-th one within δ/4 of the integer j (checked when the model is built, for both sides and semantics);
//   the count below |x| = base_g + clamp(⌊pos⌋, 0, max_internal_g), and the index is zero_index ± that count.
// That is exact whenever pos lies at least δ = 2^-12 from an integer: pos is monotone in |x|, so every threshold
// at position ≤ j + δ/4 lies below |x| and every one at ≥ j + 1 − δ/4 above it. The negative side compares with
// ≤ (mirrored thresholds), i.e. with < against their float predecessors, which are the positive boundaries or one
// float below them: a negative |x| compares as |x| + one float, which differs only where |x| is a boundary. An
// element closer than δ to an integer (about 2δ = 2^-11 of them) or on a boundary takes the bucket search. The
// CPU's vector encoders use the same model, and may differ from q8_model_index only in which elements they send
// to the search (their near test rounds pos to nearest where this one takes ⌊pos⌋): each is checked exact on
// its own.
// proptests/fastpath/fastpath_q8_vector_test.cpp checks q8_nearest_fast against q8_nearest on every float, every map.
//
// Stochastic rounding picks between the two codes c_lo ≤ x ≤ c_hi around x (below the zero-free map's code[1]
// both are code[1], and so is the result), rounding up with probability
// ⌈2^24·(x − c_lo)/(c_hi − c_lo)⌉/2^24: the comparison u·(c_hi − c_lo) < x − c_lo with u = k·2^-24 is exact
// in double (a 24-bit k times a gap of at most 25 significant bits), so the only bias is that ≤ 2^-24
// quantization of the probability. Values outside [code[0], code[255]] clamp to the end codes.
#include "cgad/fastpath/portable.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::fastpath {

inline constexpr std::size_t kQ8BlockSize = 256;
inline constexpr int kQ8Codes = 256;

// The nearest-code buckets (see above): magnitude bits clamped to [bits(2^-23), bits(1)], then shifted.
inline constexpr int kQ8BucketFractionBits = 8;
inline constexpr std::uint32_t kQ8BucketLowBits = 0x34000000u;   // 2^-23
inline constexpr std::uint32_t kQ8BucketHighBits = 0x3F800000u;  // 1.0
inline constexpr int kQ8BucketShift = 23 - kQ8BucketFractionBits;
inline constexpr int kQ8BucketsPerSign = static_cast<int>((kQ8BucketHighBits - kQ8BucketLowBits) >> kQ8BucketShift) + 1;
inline constexpr int kQ8BucketSearch = 1;  // thresholds inside one bucket, at most (checked at build)

inline constexpr int kQ8ModelGroups = 8;                       // 7 decades of codes, then the code 1 alone
inline constexpr float kQ8ModelNearness = 0x1p-12f;            // δ
inline constexpr std::uint32_t kQ8ModelLowBits = 0x30800000u;  // 2^-30: |x| is clamped up to it (q8_model_index)

// The line model of one map (above), built with it (q8_maps.cpp). Tables are indexed by G − 1 and have 8 entries,
// so that an index −1 (G = 0) wraps to 7 in the CPU's 8-lane permutes; entry 7 (the code 1 alone) has k = 0,
// c = −0.5: pos = 0.5, never near an integer.
struct Q8Model {
  std::int32_t zero_index;                // the index of the code 0 (127 signed, 0 unsigned; 0 in the zero-free map)
  std::int32_t negative_groups;           // groups below zero: 7 (signed; there is no code −1) or 0 (unsigned)
  std::int32_t boundary[kQ8ModelGroups];  // bit patterns of the positive boundaries
  float k[kQ8ModelGroups], c[kQ8ModelGroups];
  std::int32_t base[kQ8ModelGroups], max_internal[kQ8ModelGroups];
};

struct Q8Map {
  float code[kQ8Codes];  // strictly increasing, but for the zero-free map's code[0] = code[1] (q8_maps.hpp)
  // cgad semantics: midpoint[k] = (code[k] + code[k+1]) / 2 exactly, threshold[k] = midpoint[k] rounded down to
  // a float. bnb semantics: midpoint[k] = bnb's float midpoint, threshold[k] it or its predecessor by the tie rule
  // (q8_maps.hpp). midpoint[255] = +Inf; threshold[255] and the kQ8BucketSearch − 1 after it are +Inf.
  double midpoint[kQ8Codes];
  float threshold[kQ8Codes + kQ8BucketSearch - 1];
  // below[sign·kQ8BucketsPerSign + bucket]: how many thresholds lie below every float of the bucket. int32
  // rather than uint8 so that the CPU's vector gathers (dword only) can read it.
  std::int32_t below[2 * kQ8BucketsPerSign];
  Q8Model model;
  std::int32_t has_model;  // 1 when the model of the map's construction holds (the six maps of q8_maps.hpp)
  // The thresholds as integer keys for the AVX-512 encoder's binary search (q8_vector.cpp), in the implicit tree
  // order of a heap: node 1 is threshold 127, node n's children are 2n and 2n + 1, and node n of level l
  // (2^l ≤ n < 2^(l+1)) holds threshold (n − 2^l)·2^(8−l) + 2^(7−l) − 1; entry 0 is unused. key(t) is the
  // order-preserving integer of a float, t < x ⟺ key(t) < key(x) for every non-NaN float x: the bit pattern for
  // t ≥ +0, the bit pattern with its 31 magnitude bits flipped for t < 0 (so −0 ranks below +0; a threshold ±0 is
  // stored as +0's key, under which −0 and +0 both rank as equal to it, as float compares do).
  std::int32_t search_key[kQ8Codes];
};

// The order-preserving integer of a non-NaN float (Q8Map::search_key), for thresholds and inputs alike: `bits` for
// a sign bit of 0, `bits` with its 31 magnitude bits flipped for a sign bit of 1.
inline std::int32_t q8_search_key(std::uint32_t bits) {
  const std::uint32_t flip = static_cast<std::uint32_t>(static_cast<std::int32_t>(bits) >> 31) >> 1;
  return static_cast<std::int32_t>(bits ^ flip);
}

// The bucket of a float (above): its sign, then its clamped magnitude's exponent and top fraction bits. NaN
// takes −Inf's bucket, whose count is 0 (checked at build); with every compare false it then maps to index 0.
// That is an integer select, where a select on the final index would put the float compares under a branch
// the vectorizer cannot remove (they may raise the invalid flag, so they cannot be speculated).
CGAD_HD inline std::uint32_t q8_bucket(std::uint32_t bits) {
  const bool is_nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  bits = is_nan ? 0xFF800000u : bits;
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  const std::uint32_t clamped =
      magnitude < kQ8BucketLowBits ? kQ8BucketLowBits : (magnitude > kQ8BucketHighBits ? kQ8BucketHighBits : magnitude);
  return (bits >> 31) * static_cast<std::uint32_t>(kQ8BucketsPerSign) +
         ((clamped - kQ8BucketLowBits) >> kQ8BucketShift);
}

CGAD_HD inline std::uint8_t q8_nearest(float x, const Q8Map& map) {
  const std::uint32_t bits = float_to_bits(x);
  const std::int32_t below = map.below[q8_bucket(bits)];
  std::int32_t position = below;
  for (int j = 0; j < kQ8BucketSearch; ++j) position += map.threshold[below + j] < x ? 1 : 0;
  return static_cast<std::uint8_t>(position);
}

// The line model's index for x (above), or −1 where it does not decide (pos within δ of an integer, a negative |x|
// on a boundary). NaN gives 0, as q8_nearest. The CPU's vector encoders (q8_vector.cpp) compute exactly this.
CGAD_HD inline int q8_model_index(float x, const Q8Model& m) {
  const std::uint32_t bits = float_to_bits(x);
  const std::int32_t negative = static_cast<std::int32_t>(bits >> 31);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return 0;
  // |x| clamped to [2^-30, 1]: no threshold lies above 1 or below 2^-30 (the smallest boundary is ~2^-22), so
  // nothing changes but that pos is never computed from a subnormal (which costs a microcode assist on x86).
  const std::uint32_t low = kQ8ModelLowBits, high = 0x3F800000u;
  const std::int32_t clamped = static_cast<std::int32_t>(magnitude < low ? low : (magnitude > high ? high : magnitude));
  const std::int32_t compared = clamped + negative;
  std::int32_t groups = 0;
  for (int g = 0; g < kQ8ModelGroups; ++g) groups += compared > m.boundary[g] ? 1 : 0;
  const std::int32_t most = negative != 0 ? m.negative_groups : kQ8ModelGroups;
  groups = groups < most ? groups : most;
  const int g = (groups - 1) & (kQ8ModelGroups - 1);
  if (negative != 0 && clamped == m.boundary[g]) return -1;
  const float pos = bits_to_float(static_cast<std::uint32_t>(clamped)) * m.k[g] - m.c[g];
  // ⌊pos⌋ and pos's distance above it without libm (|pos| < 2^8 here): truncate, step down for a negative pos.
  const std::int32_t truncated = static_cast<std::int32_t>(pos);
  const std::int32_t floor = truncated - (pos < static_cast<float>(truncated) ? 1 : 0);
  const float fraction = pos - static_cast<float>(floor);  // in [0, 1]; 1 only where pos + 1 rounded up
  if (fraction < kQ8ModelNearness || fraction > 1.0f - kQ8ModelNearness) return -1;
  const std::int32_t internal = floor < 0 ? 0 : (floor > m.max_internal[g] ? m.max_internal[g] : floor);
  const std::int32_t below = groups == 0 ? 0 : m.base[g] + internal;
  return negative != 0 ? m.zero_index - below : m.zero_index + below;
}

// q8_nearest's index through the line model where the map has one and it decides, by the bucket search otherwise.
CGAD_HD inline std::uint8_t q8_nearest_fast(float x, const Q8Map& map) {
  const int index = map.has_model != 0 ? q8_model_index(x, map.model) : -1;
  return index >= 0 ? static_cast<std::uint8_t>(index) : q8_nearest(x, map);
}

// `random`'s top 24 bits are the uniform variate. Its nearest index is the same on both backends by proof, not by
// the same code: the device computes it by the line model, which reads the ~47 KB bucket table only on fallback;
// the host by the bucket search, the faster of the two in scalar code there (~2.7 vs ~11 ns). Both
// give q8_nearest's index on every one of the 2^32 floats for each map (fastpath_q8_vector_long_test).
CGAD_HD inline std::uint8_t q8_stochastic(float x, const Q8Map& map, std::uint32_t random) {
#if defined(__CUDA_ARCH__)
  const int nearest = q8_nearest_fast(x, map);
#else
  const int nearest = q8_nearest(x, map);
#endif
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
// division would give NaN. |value| ≤ absmax makes the quotient lie in [−1, 1] exactly. The division runs
// unconditionally (by 1 for an all-zero block) and the result is selected, so that the vectorizer need not
// speculate a guarded division; the bits are those of the guarded form.
CGAD_HD inline float q8_normalize(float value, float absmax) {
  const float quotient = value / (absmax == 0.0f ? 1.0f : absmax);
  return absmax == 0.0f ? 0.0f : quotient;
}

}  // namespace cgad::fastpath
