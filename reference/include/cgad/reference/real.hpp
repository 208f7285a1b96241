#pragma once
// The scalar types the reference runs in, and the few operations on them that differ between MPFR and
// the hardware formats: parsing a decimal exactly, printing every significant digit, testing finiteness.
//
// Boost 1.74 facts this file encodes (docs/design.md §4): an mpfr_float's precision is process-global and
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
using mpfr_real =
    boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>, boost::multiprecision::et_off>;

// long double serves the fast path's host-side gate only (fastpath/include/cgad/fastpath/staleness.hpp): σ in a
// precision above double, so that rounding it to float is correct except within a stated distance of a midpoint.
template <class Real>
concept RealScalar = std::same_as<Real, float> || std::same_as<Real, double> || std::same_as<Real, long double> ||
    std::same_as<Real, mpfr_real>;

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

// The working precision set to at least `bits` for the scope's lifetime, and the previous one restored at its end
// (also when an exception leaves the scope): the precision is process-global, so a part of a run that needs its
// own (the report's sections, a benchmark, a certified constant) sets it this way and never leaks it.
class PrecisionScope {
 public:
  explicit PrecisionScope(unsigned bits)
      : previous_(working_precision_bits()), bits_(set_working_precision_bits(bits)) {}
  ~PrecisionScope() { set_working_precision_bits(previous_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;
  // The precision in effect inside the scope.
  unsigned bits() const { return bits_; }

 private:
  unsigned previous_;
  unsigned bits_;
};

// MPFR keeps caches per thread (the constants π and log 2, its integer pools), which it frees only when asked:
// a worker thread that ran MPFR code and exited leaked them (616 bytes a thread under LeakSanitizer, on the
// simulate sweep's threads). The first call on a thread arranges for mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE) to
// run when that thread exits; later calls cost one thread-local check. The gate functions call it (every thread
// that runs the reference's MPFR arithmetic evaluates a gate); a thread that uses MPFR otherwise may call it too.
void release_mpfr_caches_at_thread_exit();

// The precision of Real in bits (24 for float, 53 for double, 64 for x86-64's long double, the working precision
// for MPFR).
template <RealScalar Real>
unsigned precision_bits() {
  if constexpr (std::same_as<Real, mpfr_real>) {
    return working_precision_bits();
  } else {
    return static_cast<unsigned>(std::numeric_limits<Real>::digits);
  }
}

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
