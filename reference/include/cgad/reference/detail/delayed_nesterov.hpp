#pragma once
// Delayed Nesterov (Liu et al. 2024, "Asynchronous Local-SGD Training for Language Modeling",
// arXiv 2401.09135): pseudo-gradients are accumulated for N arrivals before they enter the momentum.
//
//   D = D + Δ;  on every N-th arrival: b = μ·b + D/N;  θ = θ − η·(μ·b + Δ/N);  D = 0
//               otherwise:            θ = θ − η·Δ/N
// With N = 1 every arrival is an N-th arrival and the update is Nesterov's exactly (D/1 = Δ, and
// μ·b + Δ equals Δ + μ·b in every rounding mode because addition commutes).
//
// Internal to the reference: make_optimizer (optimizers.hpp) builds it, and reference/src/optimizers.cpp alone
// compiles it, so its arithmetic is compiled with cgad's flags only (docs/design.md §2).
#include "cgad/core/hyperparams.hpp"
#include "cgad/reference/outer_optimizer.hpp"

#include <string>
#include <vector>

namespace cgad::reference {

template <core::RealScalar Real>
class DelayedNesterov final : public OuterOptimizer<Real> {
 public:
  DelayedNesterov(std::size_t parameters, core::NesterovHyper<Real> hyper, std::int64_t buffer)
      : OuterOptimizer<Real>(core::FragmentLayout(parameters, 1)),
        hyper_(std::move(hyper)),
        buffer_(buffer),
        b_(parameters, Real(0)),
        d_(parameters, Real(0)) {
    core::validate(hyper_);
    if (buffer_ < 1) throw core::InputError("delayed-nesterov buffer N must be >= 1, got " + std::to_string(buffer_));
  }

  std::string_view name() const override { return "delayed-nesterov"; }
  std::vector<StateBuffer<Real>> buffers() const override { return {{"b", b_}, {"D", d_}}; }
  std::vector<core::StateCounter> counters() const override { return {{"arrivals", {arrivals_}}}; }

 protected:
  core::StepReport<Real> step(std::span<Real> theta, const Event<Real>& event) override {
    core::StepReport<Real> report;
    report.tau_effective = event.tau;
    const Real n(buffer_);
    const bool flush = (++arrivals_ % buffer_) == 0;
    for (std::size_t i = 0; i < theta.size(); ++i) {
      d_[i] = d_[i] + event.grad[i];
      const Real share = event.grad[i] / n;
      if (flush) {
        b_[i] = hyper_.momentum * b_[i] + d_[i] / n;
        theta[i] = theta[i] - hyper_.lr * (hyper_.momentum * b_[i] + share);
        d_[i] = Real(0);
      } else {
        theta[i] = theta[i] - hyper_.lr * share;
      }
    }
    return report;
  }

 private:
  core::NesterovHyper<Real> hyper_;
  std::int64_t buffer_;
  std::int64_t arrivals_ = 0;
  std::vector<Real> b_;
  std::vector<Real> d_;
};

}  // namespace cgad::reference
