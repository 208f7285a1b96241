#pragma once
// The scalar types the reference runs in, and the few operations on them that differ between MPFR and
// the hardware formats: parsing a decimal exactly, printing every significant digit, testing finiteness.
//
// Boost 1.74 facts this file encodes (DESIGN.md §4): an mpfr_float's precision is process-global and
// given in decimal digits, and Boost turns d decimal digits into digits10_2_2(d) bits, which can only take
// some values (256 is not one of them: 76 digits give 254 bits, 77 give 257). We therefore pick the
// smallest digit count whose bit precision is at least the one asked for, and report the effective bits.
#include <boost/multiprecision/mpfr.hpp>

#include <cmath>
#include <concepts>
#include <string>
#include <string_view>

namespace cgad::reference {

// Expression templates off: with them on, Boost fuses a*b + c into one mpfr_fma, so the same formula rounds
// differently depending on how it is spelled (μ·b + Δ is fused, μ·b + D/N is not) and identities that hold
// exactly in float and double — Delayed Nesterov with N = 1 is Nesterov — fail in MPFR. With them off every
// operation rounds once, as in IEEE arithmetic with contraction off, and `auto` never captures references.
using mpfr_real = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                                boost::multiprecision::et_off>;

template <class Real>
concept RealScalar = std::same_as<Real, float> || std::same_as<Real, double> || std::same_as<Real, mpfr_real>;

// Smallest and largest working precision, in bits: 64 is the least the benchmarks sweep (and more than
// double's 53, so the reference never claims less precision than the hardware rung beside it).
inline constexpr unsigned kMinPrecisionBits = 64;
inline constexpr unsigned kMaxPrecisionBits = 1u << 16;
inline constexpr unsigned kDefaultPrecisionBits = 256;

// Sets the process-wide MPFR precision to at least `bits` and returns the precision actually in effect.
// Call once, before any thread starts and before any mpfr_real exists that should carry it.
unsigned set_working_precision_bits(unsigned bits);
// Bits of every mpfr_real created from now on.
unsigned working_precision_bits();

// The precision of Real in bits (24 for float, 53 for double, the working precision for MPFR).
template <RealScalar Real>
unsigned precision_bits() {
  if constexpr (std::same_as<Real, mpfr_real>) {
    return working_precision_bits();
  } else {
    return static_cast<unsigned>(std::numeric_limits<Real>::digits);
  }
}

// Parses a decimal (or hex-float, "inf", "nan") string, correctly rounded to Real. Throws InputError
// naming `what` if the text is not a number.
template <RealScalar Real>
Real parse_real(std::string_view text, std::string_view what);

// Shortest decimal that reads back to the same value for float/double; for MPFR, enough significant
// digits to read back the same value at its precision.
template <RealScalar Real>
std::string to_decimal(const Real& x);

// `digits` significant digits, scientific notation.
template <RealScalar Real>
std::string to_decimal(const Real& x, unsigned digits);

// A short rendering for error messages: shortest round-trip for float/double, 20 digits for MPFR.
template <RealScalar Real>
std::string show(const Real& x) {
  if constexpr (std::same_as<Real, mpfr_real>) {
    return to_decimal(x, 20);
  } else {
    return to_decimal(x);
  }
}

// out = a·b and out = a/b, correctly rounded, written straight into `out` (MPFR would otherwise copy through
// a temporary; at 64 bits such copies cost as much as the arithmetic).
template <RealScalar Real>
void assign_product(Real& out, const Real& a, const Real& b) {
  if constexpr (std::same_as<Real, mpfr_real>) {
    mpfr_mul(out.backend().data(), a.backend().data(), b.backend().data(), MPFR_RNDN);
  } else {
    out = a * b;
  }
}
template <RealScalar Real>
void assign_quotient(Real& out, const Real& a, const Real& b) {
  if constexpr (std::same_as<Real, mpfr_real>) {
    mpfr_div(out.backend().data(), a.backend().data(), b.backend().data(), MPFR_RNDN);
  } else {
    out = a / b;
  }
}

// x = sqrt(x), correctly rounded, without a temporary (MPFR would otherwise allocate one per call).
template <RealScalar Real>
void sqrt_in_place(Real& x) {
  if constexpr (std::same_as<Real, mpfr_real>) {
    mpfr_sqrt(x.backend().data(), x.backend().data(), MPFR_RNDN);
  } else {
    x = std::sqrt(x);
  }
}

template <RealScalar Real>
bool is_finite(const Real& x) {
  using boost::multiprecision::isfinite;
  using std::isfinite;
  return isfinite(x);
}

}  // namespace cgad::reference
