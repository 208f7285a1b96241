#pragma once
// The validation's definitions (cgad/core/hyperparams.hpp has the contracts), included only by the libraries'
// sources that instantiate them: core/src/hyperparams.cpp for float, double and long double,
// reference/src/core_instances.cpp for mpfr_real. They are not inline, so the `extern template` declarations keep
// every other translation unit from compiling them (docs/design.md §2, "Which flags are usage requirements").
#include "cgad/core/errors.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/real_scalar.hpp"

#include <cmath>
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

template <RealScalar Real>
void validate(const AdamHyper<Real>& h) {
  require_nonnegative(h.lr, "lr");
  require_unit_interval(h.beta1, "beta1");
  require_unit_interval(h.beta2, "beta2");
  require_positive(h.eps, "eps");
  require_nonnegative(h.weight_decay, "weight_decay");
}

template <RealScalar Real>
void validate(const NesterovHyper<Real>& h) {
  require_nonnegative(h.lr, "lr");
  require_unit_interval(h.momentum, "momentum");
}

template <RealScalar Real>
void validate_range(const AdamHyper<Real>& h) {
  validate(h);
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
  const double beta2 = static_cast<double>(h.beta2);
  const double bound = adam_term_bound(static_cast<double>(h.beta1), beta2, static_cast<double>(h.eps));
  if (static_cast<double>(h.lr) * bound > kMaxStepMove || bound / std::sqrt(1 - beta2) > kMaxStepMove) {
    throw InputError(
        "lr, beta1, beta2 and eps allow a step past 2^126 (float overflows): the Adam term "
        "|m_hat|/(sqrt(v_hat) + eps) is bounded by (1 - beta1)/sqrt((1 - beta2)(1 - beta1^2/beta2)) "
        "only when beta1^2 < beta2, and otherwise by 2^63/eps alone; lr times its bound and the bound "
        "/ sqrt(1 - beta2) must be <= 2^126, got lr = " +
        show(h.lr) + ", beta1 = " + show(h.beta1) + ", beta2 = " + show(h.beta2) + ", eps = " + show(h.eps));
  }
}

template <RealScalar Real>
void validate_range(const NesterovHyper<Real>& h) {
  validate(h);
  if (h.lr > Real(kMaxLearningRate)) {
    throw InputError("lr must be <= 2^38 = 274877906944 (with |grad| < 2^63, larger steps overflow float), got " +
                     show(h.lr));
  }
}

}  // namespace cgad::core
