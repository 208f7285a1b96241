#include "cgad/theory/interval.hpp"

#include "cgad/core/errors.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

namespace cgad::theory {

using reference::mpfr_real;

namespace {
mpfr_prec_t working() {
  return static_cast<mpfr_prec_t>(reference::working_precision_bits());
}
}  // namespace

Interval::Interval(mpfr_prec_t precision, int /*tag*/) {
  mpfi_init2(value_, precision);
}

Interval::Interval(long value) : Interval(working(), 0) {
  mpfi_set_si(value_, value);
}

Interval Interval::from_decimal(std::string_view text, std::string_view what) {
  Interval result(working(), 0);
  const std::string owned(text);
  // mpfi_set_str rounds the decimal outward, so the interval contains the exact value the user typed.
  if (owned.empty() || mpfi_set_str(result.value_, owned.c_str(), 10) != 0 || mpfi_nan_p(result.value_)) {
    throw core::InputError(std::string(what) + ": '" + owned + "' is not a decimal number");
  }
  return result;
}

Interval Interval::point(const mpfr_real& value) {
  const mpfr_prec_t precision = std::max(working(), mpfr_get_prec(value.backend().data()));
  Interval result(precision, 0);
  mpfi_set_fr(result.value_, value.backend().data());
  return result;
}

Interval Interval::hull(const mpfr_real& lo, const mpfr_real& hi) {
  if (!(lo <= hi)) throw std::logic_error("Interval::hull: lo > hi");
  const mpfr_prec_t precision =
      std::max({working(), mpfr_get_prec(lo.backend().data()), mpfr_get_prec(hi.backend().data())});
  Interval result(precision, 0);
  mpfi_interv_fr(result.value_, lo.backend().data(), hi.backend().data());
  return result;
}

Interval Interval::pi() {
  Interval result(working(), 0);
  mpfi_const_pi(result.value_);
  return result;
}

Interval::Interval(const Interval& other) : Interval(mpfi_get_prec(other.value_), 0) {
  mpfi_set(value_, other.value_);
}
Interval::Interval(Interval&& other) noexcept : Interval(mpfi_get_prec(other.value_), 0) {
  mpfi_swap(value_, other.value_);
}
Interval& Interval::operator=(const Interval& other) {
  if (this != &other) {
    mpfi_set_prec(value_, mpfi_get_prec(other.value_));
    mpfi_set(value_, other.value_);
  }
  return *this;
}
Interval& Interval::operator=(Interval&& other) noexcept {
  mpfi_swap(value_, other.value_);
  return *this;
}
Interval::~Interval() {
  mpfi_clear(value_);
}

mpfr_real Interval::lower() const {
  mpfr_real x;
  mpfr_set_prec(x.backend().data(), mpfi_get_prec(value_));
  mpfi_get_left(x.backend().data(), value_);
  return x;
}
mpfr_real Interval::upper() const {
  mpfr_real x;
  mpfr_set_prec(x.backend().data(), mpfi_get_prec(value_));
  mpfi_get_right(x.backend().data(), value_);
  return x;
}
mpfr_real Interval::midpoint() const {
  mpfr_real x;
  mpfr_set_prec(x.backend().data(), mpfi_get_prec(value_));
  mpfi_mid(x.backend().data(), value_);
  return x;
}
mpfr_real Interval::relative_width() const {
  mpfr_real x;
  mpfr_set_prec(x.backend().data(), mpfi_get_prec(value_));
  // A point interval (e.g. W = 0 for τ_cut = 1) has width 0 even when its midpoint is 0.
  if (mpfr_equal_p(&value_->left, &value_->right)) {
    mpfr_set_zero(x.backend().data(), 1);
  } else {
    mpfi_diam_rel(x.backend().data(), value_);
  }
  return x;
}

bool Interval::strictly_positive() const {
  return mpfi_is_strictly_pos(value_) > 0;
}
bool Interval::strictly_negative() const {
  return mpfi_is_strictly_neg(value_) > 0;
}
bool Interval::contains(const mpfr_real& x) const {
  return mpfi_is_inside_fr(x.backend().data(), value_) > 0;
}
bool Interval::is_point_infinite() const {
  return mpfi_inf_p(value_) > 0 && mpfr_equal_p(&value_->left, &value_->right);
}

std::string Interval::to_string(unsigned digits) const {
  // Built by append rather than "[" + a + ...: GCC 12 warns falsely (-Wrestrict, PR 105651) on the latter.
  std::string text("[");
  text.append(lower_string(digits)).append(", ").append(upper_string(digits)).append("]");
  return text;
}
std::string Interval::lower_string(unsigned digits) const {
  return decimal_down(lower(), digits);
}
std::string Interval::upper_string(unsigned digits) const {
  return decimal_up(upper(), digits);
}

namespace {

Interval fresh() {
  return Interval::point(mpfr_real(0));
}

template <class Op>
Interval unary(const Interval& a, Op op) {
  Interval result = fresh();
  op(result.get(), a.get());
  return result;
}
template <class Op>
Interval binary(const Interval& a, const Interval& b, Op op) {
  Interval result = fresh();
  op(result.get(), a.get(), b.get());
  return result;
}

std::string directed(const mpfr_real& x, unsigned digits, bool up) {
  if (mpfr_nan_p(x.backend().data())) return "nan";
  if (mpfr_inf_p(x.backend().data())) return mpfr_sgn(x.backend().data()) > 0 ? "inf" : "-inf";
  if (mpfr_zero_p(x.backend().data())) return "0";  // a signed zero is still zero: no "-0.000e+00"
  char* text = nullptr;
  const int precision = static_cast<int>(digits == 0 ? 0 : digits - 1);
  const int written = up ? mpfr_asprintf(&text, "%.*RUe", precision, x.backend().data())
                         : mpfr_asprintf(&text, "%.*RDe", precision, x.backend().data());
  if (written < 0 || text == nullptr) throw std::runtime_error("mpfr_asprintf failed");
  std::string result(text);
  mpfr_free_str(text);
  return result;
}

}  // namespace

Interval operator+(const Interval& a, const Interval& b) {
  return binary(a, b, mpfi_add);
}
Interval operator-(const Interval& a, const Interval& b) {
  return binary(a, b, mpfi_sub);
}
Interval operator*(const Interval& a, const Interval& b) {
  return binary(a, b, mpfi_mul);
}
Interval operator/(const Interval& a, const Interval& b) {
  return binary(a, b, mpfi_div);
}
Interval operator-(const Interval& a) {
  return unary(a, mpfi_neg);
}
// mpfi_sqr, unlike a*a, knows both factors are the same number: sqr([−1, 2]) = [0, 4], not [−2, 4].
Interval square(const Interval& a) {
  return unary(a, mpfi_sqr);
}
Interval pow(const Interval& a, unsigned k) {
  Interval result(1);
  for (unsigned i = 0; i < k; ++i) result = result * a;
  return result;
}
Interval sqrt(const Interval& a) {
  return unary(a, mpfi_sqrt);
}
Interval exp(const Interval& a) {
  return unary(a, mpfi_exp);
}
Interval expm1(const Interval& a) {
  return unary(a, mpfi_expm1);
}
Interval sin(const Interval& a) {
  return unary(a, mpfi_sin);
}
Interval tan(const Interval& a) {
  return unary(a, mpfi_tan);
}

std::string decimal_down(const mpfr_real& x, unsigned digits) {
  return directed(x, digits, false);
}
std::string decimal_up(const mpfr_real& x, unsigned digits) {
  return directed(x, digits, true);
}

}  // namespace cgad::theory
