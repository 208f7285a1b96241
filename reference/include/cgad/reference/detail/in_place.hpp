#pragma once
// Single operations that round once into an existing variable, for the reference's loops (detail/gated_adam.hpp,
// detail/overflowing_element.hpp); with the optimizers, compiled only in the reference library.
#include "cgad/core/real_scalar.hpp"
#include "cgad/reference/real.hpp"

#include <cmath>
#include <concepts>

namespace cgad::reference {

// out = a·b and out = a/b, correctly rounded, written straight into `out` (MPFR would otherwise copy through
// a temporary; at 64 bits such copies cost as much as the arithmetic).
template <core::RealScalar Real>
void assign_product(Real& out, const Real& a, const Real& b) {
  if constexpr (std::same_as<Real, mpfr_real>) {
    mpfr_mul(out.backend().data(), a.backend().data(), b.backend().data(), MPFR_RNDN);
  } else {
    out = a * b;
  }
}
template <core::RealScalar Real>
void assign_quotient(Real& out, const Real& a, const Real& b) {
  if constexpr (std::same_as<Real, mpfr_real>) {
    mpfr_div(out.backend().data(), a.backend().data(), b.backend().data(), MPFR_RNDN);
  } else {
    out = a / b;
  }
}

// x = sqrt(x), correctly rounded, without a temporary (MPFR would otherwise allocate one per call).
template <core::RealScalar Real>
void sqrt_in_place(Real& x) {
  if constexpr (std::same_as<Real, mpfr_real>) {
    mpfr_sqrt(x.backend().data(), x.backend().data(), MPFR_RNDN);
  } else {
    x = std::sqrt(x);
  }
}

}  // namespace cgad::reference
