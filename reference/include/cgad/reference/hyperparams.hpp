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

}  // namespace cgad::reference
