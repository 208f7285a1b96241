#pragma once
// Hyperparameters of every outer optimizer and their validation, defined once (DESIGN.md §2, §3).
// The fast path and the theory read the same structs; defaults are parsed from decimal text so that
// an MPFR run sees 1e-3, not the double nearest to it.
#include "cgad/reference/errors.hpp"
#include "cgad/reference/gate.hpp"
#include "cgad/reference/real.hpp"

#include <cstdint>
#include <string>

namespace cgad::reference {

// What an Adam-family step does when σ(τ) = 0: run the step on a zero gradient (the paper's one-line
// change: t advances, m and v decay, θ moves on its momentum), or drop the event entirely.
enum class ZeroGatePolicy { apply, skip };

template <RealScalar Real>
struct AdamHyper {
  Real lr = parse_real<Real>("1e-3", "lr");
  Real beta1 = parse_real<Real>("0.9", "beta1");
  Real beta2 = parse_real<Real>("0.999", "beta2");
  Real eps = parse_real<Real>("1e-8", "eps");
  Real weight_decay = Real(0);
};

// The DiLoCo outer recipe: lr 0.7, momentum 0.9 (Douillard et al. 2023, arXiv 2311.08105).
template <RealScalar Real>
struct NesterovHyper {
  Real lr = parse_real<Real>("0.7", "lr");
  Real momentum = parse_real<Real>("0.9", "momentum");
};

template <RealScalar Real>
void require_unit_interval(const Real& x, const std::string& name) {
  if (!is_finite(x) || x < 0 || x >= 1) throw InputError(name + " must lie in [0, 1), got " + show(x));
}
template <RealScalar Real>
void require_positive(const Real& x, const std::string& name) {
  if (!is_finite(x) || x <= 0) throw InputError(name + " must be finite and > 0, got " + show(x));
}

template <RealScalar Real>
void validate(const AdamHyper<Real>& h) {
  require_positive(h.lr, "lr");
  require_unit_interval(h.beta1, "beta1");
  require_unit_interval(h.beta2, "beta2");
  require_positive(h.eps, "eps");
  if (!is_finite(h.weight_decay) || h.weight_decay < 0) {
    throw InputError("weight_decay must be finite and >= 0, got " + show(h.weight_decay));
  }
}

template <RealScalar Real>
void validate(const NesterovHyper<Real>& h) {
  require_positive(h.lr, "lr");
  require_unit_interval(h.momentum, "momentum");
}

// Upper limits that keep finite input finite (issue 16 item 4), for the commands that take hyperparameters from a
// user (`cgad replay`; fastpath::validate and the libraries take any finite value, so that a study may run an
// optimizer into divergence on purpose and report it). What they rest on: every applied event has |σ·Δ| < 2^63
// (the overflow rule, overflow_rule.hpp: gated_adam.hpp, nesterov.hpp, the fast path alike), and a state a step
// can reach is finite (a state file that holds another is refused).
//   - Nesterov family: |b| < 2^63/(1 − μ) ≤ 2^87, since μ ≤ 1 − 2^-24 (the largest float below 1); so
//     |Δ + μ·b| < 2^88, and η ≤ 2^38 makes one step move θ by less than 2^126: from any |θ| < 2^127 the result
//     stays below 2^128, float's overflow threshold. (η = 3e38 gave -Inf on the first event.)
//   - Adam family: the bias-corrected m̂ is a weighted mean of the past g, so |m̂| < 2^63, and on a moment's first
//     step |m̂/(√v̂ + ε)| ≤ 1; a step moves θ by η·(|m̂/(√v̂ + ε)| + λ|θ|), and the same η ≤ 2^38 keeps the first
//     term below 2^38 there. Decoupled decay multiplies θ by 1 − ηλ per step: ηλ ≤ 2 keeps |1 − ηλ| ≤ 1, so the
//     decay never amplifies θ (λ = 1e30 at the default η = 1e-3 sent θ to ±Inf within two steps), and λ ≤ 2^63
//     keeps the product λ·θ finite for every |θ| < 2^65.
// Not covered, and documented as such: a run that accumulates past 2^127 over very many steps, and Adam with
// β1² ≥ β2 and a tiny ε, where |m̂/(√v̂ + ε)| can approach |m̂|/ε.
inline constexpr double kMaxLearningRate = 0x1p38;  // 274877906944
inline constexpr double kMaxWeightDecay = 0x1p63;
inline constexpr double kMaxDecayPerStep = 2;      // η·λ

template <RealScalar Real>
void validate_range(const AdamHyper<Real>& h) {
  validate(h);
  if (h.lr > Real(kMaxLearningRate)) {
    throw InputError("lr must be <= 2^38 = 274877906944 (larger steps overflow float), got " + show(h.lr));
  }
  if (h.weight_decay > Real(kMaxWeightDecay)) {
    throw InputError("weight_decay must be <= 2^63 = 9223372036854775808 (weight_decay * theta must stay finite), got " +
                     show(h.weight_decay));
  }
  if (Real(h.lr * h.weight_decay) > Real(kMaxDecayPerStep)) {
    throw InputError("lr * weight_decay must be <= 2 (the decoupled decay multiplies theta by 1 - lr*weight_decay "
                     "each step; past 2 it amplifies theta to infinity), got lr = " + show(h.lr) +
                     ", weight_decay = " + show(h.weight_decay));
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

}  // namespace cgad::reference
