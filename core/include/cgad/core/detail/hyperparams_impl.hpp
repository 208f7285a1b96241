#pragma once
// The validation's definitions (cgad/core/hyperparams.hpp has the contracts), included only by the libraries'
// sources that instantiate them: core/src/hyperparams.cpp for float, double and long double,
// reference/src/core_instances.cpp for mpfr_real. They are not inline, so the `extern template` declarations keep
// every other translation unit from compiling them (docs/design.md §2, "Which flags are usage requirements").
#include "cgad/core/errors.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/real_scalar.hpp"

#include <cmath>
#include <optional>
#include <string>

namespace cgad::core {

template <RealScalar Real>
void require_unit_interval(const Real& x, const std::string& name) {
  if (!is_finite(x) || x < 0 || x >= 1) throw InputError(name + " must lie in [0, 1), got " + show(x));
}
template <RealScalar Real>
void require_positive(const Real& x, const std::string& name) {
  if (!is_finite(x) || x <= 0) throw InputError(name + " must be finite and > 0, got " + show(x));
}

template <RealScalar Real>
void require_nonnegative(const Real& x, const std::string& name) {
  if (!is_finite(x) || x < 0) throw InputError(name + " must be finite and >= 0, got " + show(x));
}

// β in [0, 1); with 1 − β from the decimal (`one_minus`, hyperparams.hpp's AdamComplements), β = 1 is the float
// nearest a decimal below 1 and valid while 1 − β > 0. The user's text was checked by parse_beta before; a β that
// reaches this without one was given as a number, and the message shows that number.
template <RealScalar Real>
void require_beta(const Real& x, std::optional<double> one_minus, const std::string& name) {
  if (!one_minus) return require_unit_interval(x, name);
  if (!is_finite(x) || x < 0 || x > 1 || !(*one_minus > 0)) {
    throw InputError(name + " must lie in [0, 1) with 1 - " + name + " > 0, got " + show(x));
  }
}

template <RealScalar Real>
void validate(const AdamHyper<Real>& h, const std::optional<AdamComplements>& from_decimal) {
  require_nonnegative(h.lr, "lr");
  require_beta(h.beta1, from_decimal ? std::optional(from_decimal->beta1) : std::nullopt, "beta1");
  require_beta(h.beta2, from_decimal ? std::optional(from_decimal->beta2) : std::nullopt, "beta2");
  require_positive(h.eps, "eps");
  require_nonnegative(h.weight_decay, "weight_decay");
}

template <RealScalar Real>
void validate(const NesterovHyper<Real>& h, std::optional<double> one_minus_momentum) {
  require_nonnegative(h.lr, "lr");
  require_beta(h.momentum, one_minus_momentum, "momentum");
}

template <RealScalar Real>
void validate_range(const AdamHyper<Real>& h, const std::optional<AdamComplements>& from_decimal) {
  validate(h, from_decimal);
  if (h.lr > Real(kMaxLearningRate)) {
    throw InputError("lr must be <= 2^38 = 274877906944 (larger steps overflow float), got " + show(h.lr));
  }
  if (h.weight_decay > Real(kMaxWeightDecay)) {
    throw InputError(
        "weight_decay must be <= 2^63 = 9223372036854775808 (weight_decay * theta must stay finite), got " +
        show(h.weight_decay));
  }
  if (Real(h.lr * h.weight_decay) > Real(kMaxDecayPerStep)) {
    throw InputError(
        "lr * weight_decay must be <= 2 (the decoupled decay multiplies theta by 1 - lr*weight_decay "
        "each step; past 2 it amplifies theta to infinity), got lr = " +
        show(h.lr) + ", weight_decay = " + show(h.weight_decay));
  }
  // 1 − β of the decimal where the run forms it so (0.99999999 holds 1.0f as β2 there, but 1 − β2 = 1e-8).
  const double one_minus1 = from_decimal ? from_decimal->beta1 : 1 - static_cast<double>(h.beta1);
  const double one_minus2 = from_decimal ? from_decimal->beta2 : 1 - static_cast<double>(h.beta2);
  const double bound = adam_term_bound(1 - one_minus1, 1 - one_minus2, static_cast<double>(h.eps));
  if (static_cast<double>(h.lr) * bound > kMaxStepMove || bound / std::sqrt(one_minus2) > kMaxStepMove) {
    throw InputError(
        "lr, beta1, beta2 and eps allow a step past 2^126 (float overflows): the Adam term "
        "|m_hat|/(sqrt(v_hat) + eps) is bounded by (1 - beta1)/sqrt((1 - beta2)(1 - beta1^2/beta2)) "
        "only when beta1^2 < beta2, and otherwise by 2^63/eps alone; lr times its bound and the bound "
        "/ sqrt(1 - beta2) must be <= 2^126, got lr = " +
        show(h.lr) + ", 1 - beta1 = " + show(one_minus1) + ", 1 - beta2 = " + show(one_minus2) +
        ", eps = " + show(h.eps));
  }
}

template <RealScalar Real>
void validate_range(const NesterovHyper<Real>& h, std::optional<double> one_minus_momentum) {
  validate(h, one_minus_momentum);
  if (h.lr > Real(kMaxLearningRate)) {
    throw InputError("lr must be <= 2^38 = 274877906944 (with |grad| < 2^63, larger steps overflow float), got " +
                     show(h.lr));
  }
  // |b| < 2^63/(1 − μ) (hyperparams.hpp): implied by η ≤ 2^38 unless μ lies within 2^-24 of 1.
  const double one_minus = one_minus_momentum ? *one_minus_momentum : 1 - static_cast<double>(h.momentum);
  if (static_cast<double>(h.lr) * 0x1p63 * (1 + 1 / one_minus) > kMaxStepMove) {
    throw InputError(
        "lr * 2^63 * (1 + 1/(1 - momentum)) must be <= 2^126 (the momentum buffer grows to 2^63/(1 - momentum); "
        "larger steps overflow float), got lr = " +
        show(h.lr) + ", 1 - momentum = " + show(one_minus));
  }
}

}  // namespace cgad::core
