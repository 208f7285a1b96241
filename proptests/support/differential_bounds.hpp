#pragma once
// The error bound of the differential suite: a running error analysis (Wilkinson; Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., §3.3) of the fast path's fp32 operation chain, evaluated per
// element alongside the chain itself, so the bound is as tight as the element's own magnitudes allow and
// covers every magnitude from subnormal to huge.
//
// Each quantity carries
//   a   — the exact value, evaluated in double;
//   de  — a bound on |a − exact| (double's own roundings: 2^-53 relative per operation, propagated);
//   fe  — a bound on |fp32 result of the fast path − exact|.
// Each fp32 operation ∘ on operands with errors fe_x, fe_y propagates the operands' error exactly
// (|x̃ỹ − xy| ≤ |x|fe_y + |y|fe_x + fe_x·fe_y;  |x̃/ỹ − x/y| ≤ (fe_x + |x/y|fe_y)/(|y| − fe_y);
//  |√x̃ − √x| ≤ min(√fe_x, fe_x/√x);  sums add) and then adds its own rounding: u·|computed| with u = 2^-24,
// plus 2^-150 (half the subnormal spacing) for a product, quotient or square root, which may land in the
// subnormal range; a sum of floats that lands there is exact. The magnitudes are upper bounds (|a| + de,
// plus fe for computed values), so no term is first-order only. A result whose bound reaches FLT_MAX may
// have overflowed: it is reported outside the fp32 domain and not compared.
#include "cgad/fastpath/detail/q8.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace cgad::proptests {

inline constexpr double kUnitRoundoff = 0x1p-24;    // fp32, round to nearest
inline constexpr double kDoubleUnit = 0x1p-53;      // the double evaluation of the exact values
inline constexpr double kHalfSubnormal = 0x1p-150;  // fp32: half the spacing of the subnormals

struct Bounded {
  double a = 0, de = 0, fe = 0;

  double exact_max() const { return std::fabs(a) + de; }
  double exact_min() const { return std::max(std::fabs(a) - de, 0.0); }
  double computed_max() const { return exact_max() + fe; }
  bool in_fp32_range() const { return computed_max() < static_cast<double>(FLT_MAX); }
};

// An input the fast path holds exactly (a float, and the reference gets the same float).
inline Bounded exact(double x) {
  return {x, 0, 0};
}
// A step-wide constant the host computed in double and rounded once to float: relative error u, plus the
// double evaluation's few units of 2^-53 (std::pow, sin, exp are within a few ulps), bounded by 2^-48, plus
// 2^-150 where the float is subnormal (Adam-Decay's σ = e^{−ατ} for ατ > 87).
inline Bounded host_constant(double x) {
  return {x, std::fabs(x) * 0x1p-48, std::fabs(x) * (kUnitRoundoff + 0x1p-48) + kHalfSubnormal};
}

namespace detail {
inline Bounded rounded(double a, double de, double propagated, bool may_be_subnormal) {
  const double computed = std::fabs(a) + de + propagated;
  return {a, de + kDoubleUnit * std::fabs(a),
          propagated + kUnitRoundoff * computed + (may_be_subnormal ? kHalfSubnormal : 0)};
}
}  // namespace detail

inline Bounded operator*(const Bounded& x, const Bounded& y) {
  const double a = x.a * y.a;
  const double de = x.exact_max() * y.de + std::fabs(y.a) * x.de;
  const double fe = x.exact_max() * y.fe + y.exact_max() * x.fe + x.fe * y.fe;
  return detail::rounded(a, de, fe, true);
}

inline Bounded operator+(const Bounded& x, const Bounded& y) {
  return detail::rounded(x.a + y.a, x.de + y.de, x.fe + y.fe, false);
}

inline Bounded operator-(const Bounded& x, const Bounded& y) {
  return detail::rounded(x.a - y.a, x.de + y.de, x.fe + y.fe, false);
}

// Requires |y| > fe_y + de_y (the callers divide by bias corrections and by sqrt(v̂) + ε, both ≥ a
// positive floor); otherwise the bound is +Inf and the comparison reports the element as unbounded.
inline Bounded operator/(const Bounded& x, const Bounded& y) {
  const double low = y.exact_min() - y.fe;
  if (!(low > 0)) return {x.a / y.a, INFINITY, INFINITY};
  const double a = x.a / y.a;
  const double ratio = x.exact_max() / y.exact_min();
  const double de = (x.de + ratio * y.de) / y.exact_min();
  const double fe = (x.fe + ratio * y.fe) / low;
  return detail::rounded(a, de, fe, true);
}

inline Bounded sqrt(const Bounded& x) {
  const double a = std::sqrt(std::max(x.a, 0.0));
  const double low = x.exact_min();
  const double de = low > 0 ? std::min(std::sqrt(x.de), x.de / std::sqrt(low)) : std::sqrt(x.de);
  const double fe = low > 0 ? std::min(std::sqrt(x.fe), x.fe / std::sqrt(low)) : std::sqrt(x.fe);
  return detail::rounded(a, de, fe, true);
}

// The fast path's v = 0 guard (element_update.hpp): where the computed v may be 0, the Adam term may be 0
// instead of the computed quotient, so its error is the larger of the two.
inline Bounded guarded_by(const Bounded& quotient, const Bounded& v) {
  if (v.exact_min() - v.fe > 0) return quotient;
  Bounded out = quotient;
  out.fe = std::max(quotient.fe, quotient.exact_max());
  return out;
}

// Storing a computed value of magnitude at most `magnitude` in bf16 adds at most half its spacing (nearest)
// or one spacing (stochastic: the result is one of the two bf16 neighbours). bf16 has fp32's exponent range
// and 8 significant bits: spacing 2^(e − 7) in binade [2^e, 2^(e+1)), and 2^-133 below 2^-126.
inline double bf16_spacing(double magnitude) {
  const int e = magnitude > 0 ? std::max(std::ilogb(magnitude), -126) : -126;
  return std::ldexp(1.0, e - 7);
}
inline double bf16_store_error(double magnitude, bool stochastic) {
  return (stochastic ? 1.0 : 0.5) * bf16_spacing(magnitude);
}

// The largest gap between consecutive codes of `map` among the code intervals that meet [lo, hi].
inline double max_code_gap(const fastpath::Q8Map& map, double lo, double hi) {
  const float* begin = map.code;
  const float* end = map.code + fastpath::kQ8Codes;
  int first = static_cast<int>(std::upper_bound(begin, end, lo) - begin) - 1;
  int last = static_cast<int>(std::lower_bound(begin, end, hi) - begin);
  first = std::clamp(first, 0, fastpath::kQ8Codes - 2);
  last = std::clamp(last, first + 1, fastpath::kQ8Codes - 1);
  double gap = 0;
  for (int k = first; k < last; ++k) gap = std::max(gap, static_cast<double>(map.code[k + 1]) - map.code[k]);
  return gap;
}

// Storing the computed value y (within fe of the exact value x) in a q8 block with stored absmax A: the
// quantizer sees fl(y/A) (within 2^-24 of y/A, which lies in [−1, 1]), picks the nearest code (half the
// local gap) or one of the two around it (one gap), and dequantizes to fl(code·A) (2^-24·A more). The local
// gap is the largest over every code interval that [x − fe, x + fe]/A ± 2^-24 meets. Below the map's lowest code
// the quantizer clamps to it, which adds the distance to it: for the zero-free v map (q8_maps.hpp) a v/A in
// [0, code[0]] stores code[0] ≈ 3.25·10^-7, an error of up to 3.25·10^-7·A where the dynamic map's is at most
// 1.6·10^-7·A (half its first gap, by storing 0) — twice the error near 0, but an overestimate, never a 0 v under
// a nonzero m, so the v = 0 guard (element_update.hpp) never acts on it but in an all-zero block. For the signed
// map the term only loosens the bound below −0.99297 (by at most its first half-gap). The absmax itself is
// the block's largest computed |y|, so it needs no bound of its own: it is read back from the state. A
// subnormal absmax makes code·A round on the subnormal grid: 2^-150 more.
inline double q8_store_error(const fastpath::Q8Map& map, double x, double fe, double absmax, bool stochastic) {
  if (absmax == 0) return 0;  // an all-zero block: every y is 0 and every code decodes to code·0 = 0
  const double lo = (x - fe) / absmax - 0x1p-24;
  const double hi = (x + fe) / absmax + 0x1p-24;
  const double below_lowest = std::max(0.0, static_cast<double>(map.code[0]) - lo);
  return absmax * ((stochastic ? 1.0 : 0.5) * max_code_gap(map, lo, hi) + below_lowest + 2 * 0x1p-24) + kHalfSubnormal;
}

}  // namespace cgad::proptests
