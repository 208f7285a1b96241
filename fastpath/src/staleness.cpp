#include "cgad/fastpath/detail/staleness.hpp"

#include <bit>
#include <cmath>
#include <limits>

namespace cgad::fastpath {

// The error bound in staleness.hpp needs at least 64 significand bits (x86-64's x87 format; binary128 elsewhere).
static_assert(std::numeric_limits<long double>::digits >= 64, "the staleness factor needs an extended long double");

core::GateParams<long double> long_double_gate(const StepConfig& config) {
  const core::GateParams<double> gate = gate_params<double>(config);
  return {gate.kind, gate.alpha, gate.tau_cut};
}

float gate_sigma(const core::GateParams<long double>& gate, std::int64_t tau) {
  return static_cast<float>(core::sigma(static_cast<long double>(tau), gate));
}

bool gate_is_zero(const core::GateParams<long double>& gate, std::int64_t tau) {
  return core::gamma(static_cast<long double>(tau), gate) == 0;
}

float sdm_scale(std::int64_t tau) {
  const std::uint64_t n = static_cast<std::uint64_t>(tau) + 1;  // 1 ≤ n ≤ 2^63
  const int b = std::bit_width(n);                              // 2^(b−1) ≤ n < 2^b
  if (std::has_single_bit(n)) return std::ldexp(1.0f, 1 - b);
  // 1/n lies in (2^−b, 2^(1−b)), so its 24-bit significand is q = floor(2^(b+23)/n) ∈ [2^23, 2^24), remainder r.
  // 1/n is never half-way between two floats (that would make n a power of two), so 2r ≠ n: round up iff 2r > n.
  const unsigned __int128 scaled = static_cast<unsigned __int128>(1) << (b + 23);
  std::uint64_t q = static_cast<std::uint64_t>(scaled / n);
  const std::uint64_t r = static_cast<std::uint64_t>(scaled % n);
  if (2 * r > n) ++q;  // r < n ≤ 2^63: no overflow; q ≤ 2^24 is exact in float
  return std::ldexp(static_cast<float>(q), -(b + 23));
}

}  // namespace cgad::fastpath
