#pragma once
// What one outer step reports, and the counters an optimizer exposes, for both the reference (Real = its scalar) and
// the fast path (Real = float): a NaN/Inf or overflowing pseudo-gradient, or a skipped zero gate, is reported here
// with the element that decided it (docs/design.md §3, "Bad input and the overflow rule").
#include "cgad/core/real_scalar.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::core {

// overflowing_gradient: finite, but |σ·Δ| ≥ 2^kRefusedGradientExponent for some element (docs/design.md §3).
enum class SkipReason { none, nonfinite_gradient, zero_gate, overflowing_gradient };

inline std::string_view to_string(SkipReason reason) {
  switch (reason) {
    case SkipReason::none:
      return "none";
    case SkipReason::nonfinite_gradient:
      return "nonfinite-gradient";
    case SkipReason::zero_gate:
      return "zero-gate";
    case SkipReason::overflowing_gradient:
      return "overflowing-gradient";
  }
  return "unknown";
}

template <RealScalar Real>
struct StepReport {
  bool applied = true;
  SkipReason reason = SkipReason::none;
  std::size_t nonfinite_index = 0;  // the first offending element when reason is nonfinite_ or overflowing_gradient
  std::int64_t tau_effective = 0;   // the staleness the gate saw (max(τ, a_f) for PA-CGAD)
  Real sigma = Real(1);             // the factor the pseudo-gradient was scaled by
  // Fast path: the elements of an applied step whose state was invalid when read (NaN/Inf moments, a negative v,
  // a bad q8 absmax), left as they were while the others stepped (docs/design.md §3, the invalid-state guard).
  std::uint64_t invalid_state = 0;
};

struct StateCounter {
  std::string name;
  std::vector<std::int64_t> values;  // one per fragment where the counter is per fragment
};

}  // namespace cgad::core
