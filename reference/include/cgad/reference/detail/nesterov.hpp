#pragma once
// Staleness-blind and staleness-dampened Nesterov momentum (docs/design.md §3 baselines).
//
// Nesterov, the DiLoCo outer recipe (Douillard et al. 2023, arXiv 2311.08105):
//   b = μ·b + Δ;  θ = θ − η·(Δ + μ·b)
// SDM, staleness-dampened momentum: the same with Δ replaced by Δ/(1 + τ), the staleness-aware learning rate
// of Zhang et al. 2016 (arXiv 1511.05950). The paper compared against an SDM whose definition is not public;
// this one is cgad's own.
//
// An event with |σ·Δ_i| ≥ 2^63 for some i (σ = 1 for Nesterov, 1/(1 + τ) for SDM) is refused whole and reported
// as overflowing, as in the Adam family (overflow_rule.hpp; see step()).
//
// Internal to the reference: make_optimizer (optimizers.hpp) builds it, and reference/src/optimizers.cpp alone
// compiles it, so its arithmetic is compiled with cgad's flags only (docs/design.md §2).
#include "cgad/core/hyperparams.hpp"
#include "cgad/reference/detail/overflowing_element.hpp"
#include "cgad/reference/outer_optimizer.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace cgad::reference {

template <core::RealScalar Real>
class Nesterov final : public OuterOptimizer<Real> {
 public:
  enum class Staleness { ignore, dampen };

  Nesterov(std::size_t parameters, core::NesterovHyper<Real> hyper, Staleness staleness)
      : OuterOptimizer<Real>(core::FragmentLayout(parameters, 1)),
        hyper_(std::move(hyper)),
        staleness_(staleness),
        b_(parameters, Real(0)) {
    core::validate(hyper_);
  }

  std::string_view name() const override { return staleness_ == Staleness::dampen ? "sdm" : "nesterov"; }
  std::vector<StateBuffer<Real>> buffers() const override { return {{"b", b_}}; }
  std::vector<core::StateCounter> counters() const override { return {}; }

 protected:
  core::StepReport<Real> step(std::span<Real> theta, const Event<Real>& event) override {
    core::StepReport<Real> report;
    report.tau_effective = event.tau;
    report.sigma = staleness_ == Staleness::dampen ? Real(Real(1) / Real(1 + event.tau)) : Real(1);
    // The Adam family's overflow rule (gated_adam.hpp, overflow_rule.hpp), here too: an event with
    // |σ·Δ_i| ≥ 2^63 is refused whole. Momentum sums such steps (|b| reaches |d|/(1 − μ)) and θ moves by
    // η·(d + μb), so a Δ near float's range gave −Inf on its first event in every fast-path format;
    // below 2^63, |d + μb| < 2^88 and validate_range's η ≤ 2^38 keeps a step finite. The exact product
    // decides here; the fast path decides on its float σ·Δ, which can differ only within one rounding of 2^63.
    if (const std::size_t i = first_overflowing_element(report.sigma, event.grad); i != event.grad.size()) {
      report.applied = false;
      report.reason = core::SkipReason::overflowing_gradient;
      report.nonfinite_index = i;
      return report;
    }
    for (std::size_t i = 0; i < theta.size(); ++i) {
      const Real d = report.sigma * event.grad[i];
      b_[i] = hyper_.momentum * b_[i] + d;
      theta[i] = theta[i] - hyper_.lr * (d + hyper_.momentum * b_[i]);
    }
    return report;
  }

 private:
  core::NesterovHyper<Real> hyper_;
  Staleness staleness_;
  std::vector<Real> b_;
};

}  // namespace cgad::reference
