#pragma once
// The scalar types every part's templates run in, and what differs between them, without arbitrary precision:
// float, double and long double here; reference/real.hpp adds its MPFR type by specializing ScalarTraits (and the
// parse/print functions below), so the gate and the validation (gate.hpp, hyperparams.hpp) are written once for
// all four.
#include <cmath>
#include <concepts>
#include <numbers>
#include <string>
#include <string_view>

namespace cgad::core {

// What a template needs of a scalar type beyond arithmetic. The hardware formats are described here; another type
// (the reference's mpfr_real) becomes a RealScalar by specializing this template where the type is defined.
template <class Real>
struct ScalarTraits {
  static constexpr bool is_real_scalar = false;
};

template <std::floating_point Real>
struct ScalarTraits<Real> {
  static constexpr bool is_real_scalar = true;
  // π correctly rounded to Real.
  static Real pi() { return std::numbers::pi_v<Real>; }
  // Called by the gate before it computes on the calling thread (MPFR's per-thread caches; nothing here).
  static void prepare_thread() {}
};

// float, double, long double and (with reference/real.hpp) the reference's mpfr_real. long double serves the fast
// path's host-side gate (fastpath/include/cgad/fastpath/detail/staleness.hpp): σ in a precision above double, so that
// rounding it to float is correct except within a stated distance of a midpoint.
template <class Real>
concept RealScalar = ScalarTraits<Real>::is_real_scalar;

// The closed set of hardware scalar types: INSTANCES(EXTERN, Real) for each, which a header applies with EXTERN =
// extern (declarations of explicit instantiations: gate.hpp, hyperparams.hpp) and core's sources with EXTERN empty
// (the instantiations themselves: core/src/gate.cpp, core/src/hyperparams.cpp). mpfr_real's are the reference's
// (reference/real.hpp, reference/src/core_instances.cpp).
#define CGAD_CORE_FOR_HARDWARE_SCALARS(INSTANCES, EXTERN) \
  INSTANCES(EXTERN, float)                                \
  INSTANCES(EXTERN, double)                               \
  INSTANCES(EXTERN, long double)

// cgad's one number grammar, for every number it reads as text -- stream values, hyperparameters, option values,
// in every backend and format alike:
//   [+-]? ( digits [ "." digits* ] | "." digits ) ( [eE] [+-]? digits )?     a decimal
//   [+-]? ( "inf" | "infinity" | "nan" ), in any case                         a non-finite value
// Nothing else: no hexadecimal or binary ("0x1p-3", "0b101" -- MPFR's own parser would take them, the hardware
// formats' would not), no NaN payload "nan(...)", no white space, nothing locale-dependent.
enum class NumberText { decimal, infinity, nan, invalid };
NumberText classify_number_text(std::string_view text);

// Parses text of the grammar above, correctly rounded to Real; InputError naming `what` for any other text, and
// for a decimal whose magnitude is past Real's largest finite value ("1e39" for float; MPFR's exponent range for
// the reference) -- that would become an infinity nobody wrote. A decimal below the smallest subnormal rounds,
// correctly, to (signed) zero or to a subnormal, as IEEE arithmetic does ("1e-50" is 0 in float and bf16).
// Defined for float and double in core/src/number_text.cpp, for mpfr_real in reference/src/precision.cpp.
template <RealScalar Real>
Real parse_real(std::string_view text, std::string_view what);

// Shortest decimal that reads back to the same value for float/double; for MPFR, enough significant
// digits to read back the same value at its precision.
// Every format keeps the sign of zero: -0 prints as "-0" (float, double) or "-0.000...e+00" (MPFR).
template <RealScalar Real>
std::string to_decimal(const Real& x);

// `digits` significant digits, scientific notation.
template <RealScalar Real>
std::string to_decimal(const Real& x, unsigned digits);

// A short rendering for error messages: shortest round-trip for float/double, 20 digits for MPFR.
template <RealScalar Real>
std::string show(const Real& x);

template <RealScalar Real>
bool is_finite(const Real& x) {
  using std::isfinite;
  return isfinite(x);  // Boost.Multiprecision's by argument-dependent lookup for mpfr_real
}

}  // namespace cgad::core
