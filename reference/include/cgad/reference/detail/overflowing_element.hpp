#pragma once
// first_overflowing_element, for the reference's optimizers (detail/gated_adam.hpp, detail/nesterov.hpp); with them,
// compiled only in the reference library.
#include "cgad/core/overflow_rule.hpp"
#include "cgad/core/real_scalar.hpp"
#include "cgad/reference/detail/in_place.hpp"

#include <cmath>
#include <cstddef>
#include <span>

namespace cgad::reference {

// The overflow rule (overflow_rule.hpp) as the reference decides it, on the exact product at the working
// precision: the first i with |σ·Δ_i| ≥ 2^kRefusedGradientExponent, or grad.size() when there is none.
template <core::RealScalar Real>
std::size_t first_overflowing_element(const Real& sigma, std::span<const Real> grad) {
  using std::ldexp;
  const Real limit = ldexp(Real(1), core::kRefusedGradientExponent), negative_limit = -limit;
  Real product;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    assign_product(product, sigma, grad[i]);  // one rounding, into a reused temporary (no MPFR allocation)
    if (product >= limit || product <= negative_limit) return i;
  }
  return grad.size();
}

}  // namespace cgad::reference
