#pragma once
// The scalar types the reference runs in, and the few operations on them that differ between MPFR and
// the hardware formats: parsing a decimal exactly, printing every significant digit, testing finiteness.
//
// Boost 1.74 facts this file encodes (docs/design.md §4): an mpfr_float's precision is process-global and
// given in decimal digits, and Boost turns d decimal digits into digits10_2_2(d) bits, which can only take
// some values (256 is not one of them: 76 digits give 254 bits, 77 give 257). We therefore pick the
// smallest digit count whose bit precision is at least the one asked for, and report the effective bits.
#include "cgad/core/gate.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/real_scalar.hpp"

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
template <core::RealScalar Real>
unsigned precision_bits() {
  if constexpr (std::same_as<Real, mpfr_real>) {
    return working_precision_bits();
  } else {
    return static_cast<unsigned>(std::numeric_limits<Real>::digits);
  }
}

}  // namespace cgad::reference

// mpfr_real as a core::RealScalar: π at the working precision (never through double), and the per-thread cache
// release before MPFR arithmetic; parse_real, to_decimal and show for it are in reference/src/precision.cpp.
namespace cgad::core {

template <>
struct ScalarTraits<reference::mpfr_real> {
  static constexpr bool is_real_scalar = true;
  static reference::mpfr_real pi() {
    reference::mpfr_real value;
    mpfr_const_pi(value.backend().data(), MPFR_RNDN);
    return value;
  }
  static void prepare_thread() { reference::release_mpfr_caches_at_thread_exit(); }
};

template <>
reference::mpfr_real parse_real<reference::mpfr_real>(std::string_view text, std::string_view what);
template <>
std::string to_decimal<reference::mpfr_real>(const reference::mpfr_real& x);
template <>
std::string to_decimal<reference::mpfr_real>(const reference::mpfr_real& x, unsigned digits);
template <>
std::string show<reference::mpfr_real>(const reference::mpfr_real& x);

// Core's gate and validation in mpfr_real: instantiated in the reference (reference/src/core_instances.cpp), declared
// here, where mpfr_real becomes a RealScalar (gate.hpp, hyperparams.hpp declare the hardware types').
CGAD_CORE_GATE_INSTANCES(extern, reference::mpfr_real)
CGAD_CORE_HYPERPARAMS_INSTANCES(extern, reference::mpfr_real)

}  // namespace cgad::core
