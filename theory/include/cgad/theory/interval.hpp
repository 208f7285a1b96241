#pragma once
// A small owning handle for an MPFI interval (mpfi_t): [lo, hi] with MPFR endpoints, every operation rounded
// outward, so the exact real result of an operation on any points of the operands lies inside the result.
// That inclusion property is what makes the constants of theory/ proofs rather than samples.
#include "cgad/reference/real.hpp"

#include <mpfi.h>

#include <string>
#include <string_view>

namespace cgad::theory {

class Interval {
 public:
  // The point interval [value, value] (exact: the precision is chosen to hold it, at least the working one).
  explicit Interval(long value = 0);
  // The smallest interval at the working precision that contains the exact decimal `text`.
  static Interval from_decimal(std::string_view text, std::string_view what);
  // [value, value] for an MPFR value, exact (the interval takes the value's precision if larger).
  static Interval point(const reference::mpfr_real& value);
  // [lo, hi]; lo ≤ hi is the caller's promise (checked).
  static Interval hull(const reference::mpfr_real& lo, const reference::mpfr_real& hi);
  static Interval pi();

  Interval(const Interval& other);
  Interval(Interval&& other) noexcept;
  Interval& operator=(const Interval& other);
  Interval& operator=(Interval&& other) noexcept;
  ~Interval();

  mpfi_ptr get() { return value_; }
  mpfi_srcptr get() const { return value_; }

  // Endpoints, rounded outward into an mpfr_real of the interval's own precision (hence exactly).
  reference::mpfr_real lower() const;
  reference::mpfr_real upper() const;
  reference::mpfr_real midpoint() const;
  // (hi − lo)/|mid|, rounded up (MPFI's diam_rel); 0 for a point interval.
  reference::mpfr_real relative_width() const;

  bool strictly_positive() const;
  bool strictly_negative() const;
  bool contains(const reference::mpfr_real& x) const;
  bool is_point_infinite() const;

  // "[lo, hi]" with `digits` significant digits, lo printed rounded down and hi rounded up, so the printed
  // interval still contains the value.
  std::string to_string(unsigned digits) const;
  std::string lower_string(unsigned digits) const;
  std::string upper_string(unsigned digits) const;

 private:
  explicit Interval(mpfr_prec_t precision, int /*tag*/);
  mpfi_t value_;
};

// Arithmetic and the elementary functions MPFI provides; each result has the working precision.
Interval operator+(const Interval& a, const Interval& b);
Interval operator-(const Interval& a, const Interval& b);
Interval operator*(const Interval& a, const Interval& b);
Interval operator/(const Interval& a, const Interval& b);
Interval operator-(const Interval& a);
Interval square(const Interval& a);
Interval pow(const Interval& a, unsigned k);
Interval sqrt(const Interval& a);  // a ⊆ [0, ∞)
Interval exp(const Interval& a);
Interval expm1(const Interval& a);
Interval sin(const Interval& a);
Interval tan(const Interval& a);

// Directed-rounding decimal output of one MPFR value: `digits` significant digits, rounded down or up.
std::string decimal_down(const reference::mpfr_real& x, unsigned digits);
std::string decimal_up(const reference::mpfr_real& x, unsigned digits);

}  // namespace cgad::theory
