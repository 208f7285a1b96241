#pragma once
// Test objectives for the convergence bound (docs/design.md §6): each is L-smooth on all of R^d with a proven L,
// bounded below by a proven f*, and (except the quadratic) has a globally bounded gradient, so the bounded
// step ‖u_t‖ ≤ G of the theorem holds without ever clipping. Templated on Real: the trajectory runs them in
// MPFR, the tests also in double.
//
// All four are separable, f(x) = Σ_i φ_i(x_i): the Hessian is diagonal, so ‖∇²f(x)‖₂ = max_i |φ_i''(x_i)|
// and L = max_i sup_s |φ_i''(s)| is a global Lipschitz constant of ∇f in the 2-norm (mean-value theorem);
// likewise ‖∇f(x)‖₂ ≤ (Σ_i sup|φ_i'|²)^{1/2}. Each φ_i's bounds are derived beside it.
#include "cgad/core/errors.hpp"
#include "cgad/reference/real.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::theory {

enum class ObjectiveKind { geman_mcclure, sine_ripple, logcosh_ripple, noisy_quadratic };
inline constexpr const char* kObjectiveKindNames = "geman-mcclure|sine-ripple|logcosh-ripple|noisy-quadratic";
ObjectiveKind parse_objective_kind(std::string_view name);  // InputError on an unknown name
const char* to_string(ObjectiveKind kind);

template <core::RealScalar Real>
class Objective {
 public:
  virtual ~Objective() = default;
  virtual Real value(const std::vector<Real>& x) const = 0;
  virtual void gradient(const std::vector<Real>& x, std::vector<Real>& g) const = 0;
  virtual Real smoothness() const = 0;   // L: ‖∇f(x) − ∇f(y)‖ ≤ L‖x − y‖ for all x, y
  virtual Real lower_bound() const = 0;  // f*: f(x) ≥ f* for all x
  // sup_x ‖∇f(x)‖₂ when finite; the quadratic has none.
  virtual std::optional<Real> gradient_bound() const = 0;
  // The default multiplicative gradient-noise level s of the oracle (0: exact gradients).
  virtual double default_noise() const { return 0.0; }
  std::size_t dimension() const { return coefficient_.size(); }

 protected:
  // Per-coordinate data drawn from the seed: a weight and a centre (their meaning depends on the objective).
  Objective(std::size_t dimension, std::uint64_t seed, double weight_lo, double weight_hi, double centre_abs)
      : coefficient_(dimension), centre_(dimension) {
    std::mt19937_64 engine(seed);
    for (std::size_t i = 0; i < dimension; ++i) {
      coefficient_[i] = Real(weight_lo + (weight_hi - weight_lo) * unit(engine));
      centre_[i] = Real(centre_abs * (2 * unit(engine) - 1));
    }
  }
  static double unit(std::mt19937_64& engine) { return static_cast<double>(engine() >> 11) * 0x1p-53; }
  Real max_coefficient() const {
    Real best = coefficient_[0];
    for (const Real& c : coefficient_) best = c > best ? c : best;
    return best;
  }
  Real coefficient_norm() const {
    Real sum(0);
    for (const Real& c : coefficient_) sum += c * c;
    using std::sqrt;
    return Real(sqrt(sum));
  }
  std::vector<Real> coefficient_;
  std::vector<Real> centre_;
};

// Geman–McClure robust loss (non-convex): φ_i(s) = w_i·ψ(s), ψ(s) = s²/(1+s²), s = x_i − c_i, w_i ∈ [½, 2].
//   ψ'(s) = 2s/(1+s²)²;  ψ''(s) = 2(1−3s²)/(1+s²)³.  With u = s²: d/du ψ'' = −12(1−u)/(1+u)⁴, so on u ≥ 0
//   ψ'' decreases to its minimum −½ at u = 1 and then rises to 0; its maximum is ψ''(0) = 2. Hence
//   |ψ''| ≤ 2, L = 2·max w_i, and ψ'' < 0 for s² > ⅓ (non-convex).
//   |ψ'| is maximal where (1+u) = 4u, u = ⅓: |ψ'| ≤ 2·(1/√3)/(16/9) = 3√3/8, so G = (3√3/8)·‖w‖₂.
//   f ≥ 0 = f* (attained at x = c).
template <core::RealScalar Real>
class GemanMcClure final : public Objective<Real> {
 public:
  GemanMcClure(std::size_t d, std::uint64_t seed) : Objective<Real>(d, seed, 0.5, 2.0, 2.0) {}
  Real value(const std::vector<Real>& x) const override {
    Real sum(0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Real s = x[i] - this->centre_[i];
      const Real s2 = s * s;
      sum += this->coefficient_[i] * s2 / (1 + s2);
    }
    return sum;
  }
  void gradient(const std::vector<Real>& x, std::vector<Real>& g) const override {
    g.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Real s = x[i] - this->centre_[i];
      const Real q = 1 + s * s;
      g[i] = this->coefficient_[i] * 2 * s / (q * q);
    }
  }
  Real smoothness() const override { return Real(2 * this->max_coefficient()); }
  Real lower_bound() const override { return Real(0); }
  std::optional<Real> gradient_bound() const override {
    using std::sqrt;
    return Real(3 * sqrt(Real(3)) / 8 * this->coefficient_norm());
  }
};

// Sine ripple (non-convex, periodic): φ_i(s) = a_i·(1 − cos(ω s)), s = x_i − c_i, a_i ∈ [½, 2], ω = 2.
//   φ_i' = a_i ω sin(ω s), φ_i'' = a_i ω² cos(ω s) ∈ [−a_i ω², a_i ω²]: L = ω²·max a_i, G = ω‖a‖₂,
//   non-convex wherever cos(ω s) < 0. f ≥ 0 = f* (attained at x = c).
template <core::RealScalar Real>
class SineRipple final : public Objective<Real> {
 public:
  static constexpr int kOmega = 2;
  SineRipple(std::size_t d, std::uint64_t seed) : Objective<Real>(d, seed, 0.5, 2.0, 2.0) {}
  Real value(const std::vector<Real>& x) const override {
    using std::cos;
    Real sum(0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      sum += this->coefficient_[i] * (1 - cos(Real(kOmega * (x[i] - this->centre_[i]))));
    }
    return sum;
  }
  void gradient(const std::vector<Real>& x, std::vector<Real>& g) const override {
    using std::sin;
    g.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      g[i] = this->coefficient_[i] * kOmega * sin(Real(kOmega * (x[i] - this->centre_[i])));
    }
  }
  Real smoothness() const override { return Real(kOmega * kOmega * this->max_coefficient()); }
  Real lower_bound() const override { return Real(0); }
  std::optional<Real> gradient_bound() const override { return Real(kOmega * this->coefficient_norm()); }
};

// Log-cosh with a ripple (non-convex mixture): φ_i(s) = log cosh(s) + a·(1 − cos(ω s)), s = x_i − c_i,
// a = ½, ω = 3 (the seed's weights are unused: every coordinate has the same shape, shifted).
//   φ'' = sech²(s) + aω² cos(ω s) ∈ [−aω², 1 + aω²] = [−4.5, 5.5]: L = 1 + aω² = 11/2. Non-convex:
//   at ω s = π (s = π/3) φ'' = sech²(π/3) − 4.5 < 0.  |φ'| = |tanh s + aω sin(ω s)| ≤ 1 + aω = 5/2, so
//   G = (5/2)√d.  f ≥ 0 = f* (both terms ≥ 0, attained at x = c).
//   log cosh s is evaluated as |s| + log1p(e^{−2|s|}) − log 2, which neither overflows nor cancels.
template <core::RealScalar Real>
class LogCoshRipple final : public Objective<Real> {
 public:
  LogCoshRipple(std::size_t d, std::uint64_t seed) : Objective<Real>(d, seed, 1.0, 1.0, 2.0) {}
  Real value(const std::vector<Real>& x) const override {
    using std::abs;
    using std::cos;
    using std::exp;
    using std::log;
    using std::log1p;
    const Real log2 = log(Real(2));
    Real sum(0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Real s = x[i] - this->centre_[i];
      const Real a = abs(s);
      sum += a + log1p(Real(exp(Real(-2 * a)))) - log2 + Real(kA) * (1 - cos(Real(kOmega * s)));
    }
    return sum;
  }
  void gradient(const std::vector<Real>& x, std::vector<Real>& g) const override {
    using std::sin;
    using std::tanh;
    g.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Real s = x[i] - this->centre_[i];
      g[i] = tanh(s) + Real(kA) * kOmega * sin(Real(kOmega * s));
    }
  }
  Real smoothness() const override { return Real(1 + Real(kA) * kOmega * kOmega); }
  Real lower_bound() const override { return Real(0); }
  std::optional<Real> gradient_bound() const override {
    using std::sqrt;
    return Real((1 + Real(kA) * kOmega) * sqrt(Real(this->dimension())));
  }

 private:
  static constexpr double kA = 0.5;  // exact in every format
  static constexpr int kOmega = 3;
};

// Noisy quadratic model with a power-law spectrum: f(x) = ½ Σ_i λ_i (x_i − c_i)², λ_i = i^{−3/2}
// (i = 1…d). Convex, L = λ_1 = 1, f ≥ 0 = f*. Its gradient is unbounded, so the trajectory clips the step
// at G; the noise lives in the oracle (multiplicative, default level ½), not here.
template <core::RealScalar Real>
class NoisyQuadratic final : public Objective<Real> {
 public:
  NoisyQuadratic(std::size_t d, std::uint64_t seed) : Objective<Real>(d, seed, 1.0, 1.0, 2.0) {
    using std::pow;
    for (std::size_t i = 0; i < d; ++i) this->coefficient_[i] = Real(pow(Real(i + 1), Real(-1.5)));
  }
  Real value(const std::vector<Real>& x) const override {
    Real sum(0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Real s = x[i] - this->centre_[i];
      sum += this->coefficient_[i] * s * s;
    }
    return Real(sum / 2);
  }
  void gradient(const std::vector<Real>& x, std::vector<Real>& g) const override {
    g.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) g[i] = this->coefficient_[i] * (x[i] - this->centre_[i]);
  }
  Real smoothness() const override { return Real(1); }
  Real lower_bound() const override { return Real(0); }
  std::optional<Real> gradient_bound() const override { return std::nullopt; }
  double default_noise() const override { return 0.5; }
  // λ_1 … λ_d: the Hessian's diagonal, which also shapes the simulation's gradient noise (simulate/).
  const std::vector<Real>& spectrum() const { return this->coefficient_; }
};

template <core::RealScalar Real>
std::unique_ptr<Objective<Real>> make_objective(ObjectiveKind kind, std::size_t dimension, std::uint64_t seed) {
  if (dimension == 0) throw core::InputError("objective dimension must be >= 1");
  switch (kind) {
    case ObjectiveKind::geman_mcclure:
      return std::make_unique<GemanMcClure<Real>>(dimension, seed);
    case ObjectiveKind::sine_ripple:
      return std::make_unique<SineRipple<Real>>(dimension, seed);
    case ObjectiveKind::logcosh_ripple:
      return std::make_unique<LogCoshRipple<Real>>(dimension, seed);
    case ObjectiveKind::noisy_quadratic:
      return std::make_unique<NoisyQuadratic<Real>>(dimension, seed);
  }
  throw core::InputError("unknown objective");
}

}  // namespace cgad::theory
