#pragma once
// The Adam family of outer optimizers, gated before the moment buffers (docs/design.md §3):
//   CGAD (cosine gate), Adam-Decay (γ ≡ 1), Adam (σ ≡ 1), and PA-CGAD (CGAD per fragment, with ages).
//
//   g = σ(τ)·Δ;  t += 1;  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//   θ = θ − η·( (m/(1−β1^t)) / (sqrt(v/(1−β2^t)) + ε) + λ·θ )
//
// Fragments and ages (PA-CGAD). Each fragment f keeps its own step count t_f and an age a_f: the number of
// outer rounds that passed since f was last synchronized without synchronizing it. The caller (the parameter
// server's loop, or `cgad replay`, which treats every event as one outer round) ends each round with
// advance_round(). An event for fragment f is gated by σ(max(τ, a_f)), and it synchronizes f — the worker's
// copy is refreshed whatever the server does with the pseudo-gradient — so a_f restarts from 0 whether the
// event is applied or skipped for a zero gate (a skip that kept the age would freeze the fragment forever once
// a_f ≥ τ_cut). The ages are kept as the round of each fragment's last synchronization:
// a_f = max(0, round − last_sync_f − 1). So a fragment synchronized every round has age 0 (P = 1 is exactly
// CGAD), one synchronized every P rounds has age P − 1 when it is synchronized, and a second event for f in
// the round of its synchronization sees age 0. P > τ_cut is refused: a round-robin schedule alone would then
// give every event an age P − 1 ≥ τ_cut, where the cosine gate is exactly 0. Only an event refused for a NaN/Inf or
// overflowing pseudo-gradient changes nothing, ages included (it never reached the server's state). CGAD, Adam-Decay
// and Adam have one fragment and ignore ages.
//
// Overflow (docs/design.md §3, detail/overflowing_element.hpp): an event with |σ·Δ_i| ≥ 2^63 for some i is refused
// whole, like a NaN/Inf one, so that the production fast path can hold every quantity it derives from g². The exact
// product decides here; the fast path decides on its float σ·Δ, which can differ only within one rounding of 2^63.
//
// Internal to the reference: make_optimizer (optimizers.hpp) builds it, and reference/src/optimizers.cpp alone
// compiles it, so its arithmetic is compiled with cgad's flags only (docs/design.md §2).
#include "cgad/core/gate.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/reference/detail/in_place.hpp"
#include "cgad/reference/detail/overflowing_element.hpp"
#include "cgad/reference/outer_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace cgad::reference {

template <core::RealScalar Real>
class GatedAdam final : public OuterOptimizer<Real> {
 public:
  enum class Ages { ignore, gate_by_max };

  GatedAdam(std::string name, core::FragmentLayout layout, core::AdamHyper<Real> hyper, core::GateParams<Real> gate,
            core::ZeroGatePolicy on_zero_gate, Ages ages)
      : OuterOptimizer<Real>(layout),
        name_(std::move(name)),
        hyper_(std::move(hyper)),
        gate_(std::move(gate)),
        on_zero_gate_(on_zero_gate),
        ages_rule_(ages),
        m_(layout.parameters(), Real(0)),
        v_(layout.parameters(), Real(0)),
        t_(layout.fragments(), 0),
        last_sync_(layout.fragments(), -1) {
    core::validate(hyper_);
    core::validate(gate_);
    if (ages_rule_ == Ages::gate_by_max && gate_.kind == core::GateKind::cosine &&
        Real(static_cast<double>(layout.fragments()) - 1.0) >= gate_.tau_cut) {
      throw core::InputError(
          "pa-cgad needs at most tau_cut fragments (a fragment synchronized every P rounds has age "
          "P - 1, and an age >= tau_cut gates every event to 0); got P = " +
          std::to_string(layout.fragments()) + ", tau_cut = " + core::show(gate_.tau_cut));
    }
  }

  std::string_view name() const override { return name_; }

  void advance_round() override { ++round_; }

  // a_f as defined above.
  std::int64_t age(std::size_t f) const { return std::max<std::int64_t>(0, round_ - last_sync_[f] - 1); }

  std::vector<StateBuffer<Real>> buffers() const override { return {{"m", m_}, {"v", v_}}; }
  std::vector<core::StateCounter> counters() const override {
    std::vector<core::StateCounter> out{{"t", t_}};
    if (ages_rule_ == Ages::gate_by_max) {
      std::vector<std::int64_t> ages(t_.size());
      for (std::size_t f = 0; f < ages.size(); ++f) ages[f] = age(f);
      out.push_back({"age", std::move(ages)});
    }
    return out;
  }

 protected:
  core::StepReport<Real> step(std::span<Real> theta, const Event<Real>& event) override {
    const std::size_t f = event.fragment;
    core::StepReport<Real> report;
    report.tau_effective = ages_rule_ == Ages::gate_by_max ? std::max(event.tau, age(f)) : event.tau;
    report.sigma = core::sigma(Real(report.tau_effective), gate_);
    const bool zero_gate_skip =
        on_zero_gate_ == core::ZeroGatePolicy::skip && core::gamma(Real(report.tau_effective), gate_) == 0;
    if (!zero_gate_skip) {
      if (const std::size_t i = first_overflowing_element(report.sigma, event.grad); i != event.grad.size()) {
        report.applied = false;
        report.reason = core::SkipReason::overflowing_gradient;
        report.nonfinite_index = i;
        return report;
      }
    }
    if (ages_rule_ == Ages::gate_by_max) last_sync_[f] = round_;
    // A zero *gate* (γ = 0: the cosine gate at τ ≥ τ_cut) is what `skip` drops — not a σ that merely
    // underflows, which Adam-Decay's e^{−ατ} does in any finite format for large enough ατ. Deciding on σ
    // would make the decision depend on the format's exponent range.
    if (zero_gate_skip) {
      report.applied = false;
      report.reason = core::SkipReason::zero_gate;
      return report;
    }
    const std::size_t offset = this->layout().offset(f);
    const std::int64_t t = ++t_[f];
    using std::pow;
    const Real one(1);
    const Real bias1 = one - pow(hyper_.beta1, Real(t));
    const Real bias2 = one - pow(hyper_.beta2, Real(t));
    const Real keep1 = one - hyper_.beta1;
    const Real keep2 = one - hyper_.beta2;
    // Three-operand and compound operations on three reused temporaries: in MPFR each rounds in place, with
    // no allocation and no copy, which keeps this loop near hand-written mpfr_* calls
    // (bench/reference_step_bench), while every operation still rounds exactly once, in the order the
    // formula above is written.
    Real g, scaled, denominator;
    for (std::size_t i = 0; i < theta.size(); ++i) {
      Real& m = m_[offset + i];
      Real& v = v_[offset + i];
      assign_product(g, report.sigma, event.grad[i]);  // g = σ·Δ
      assign_product(scaled, keep1, g);
      m *= hyper_.beta1;
      m += scaled;  // m = β1·m + (1−β1)·g
      assign_product(scaled, g, g);
      scaled *= keep2;
      v *= hyper_.beta2;
      v += scaled;  // v = β2·v + (1−β2)·g²
      assign_quotient(denominator, v, bias2);
      sqrt_in_place(denominator);
      denominator += hyper_.eps;  // sqrt(v/(1−β2^t)) + ε
      assign_quotient(g, m, bias1);
      g /= denominator;  // m̂ / (sqrt(v̂) + ε)
      assign_product(scaled, hyper_.weight_decay, theta[i]);
      g += scaled;  // … + λ·θ
      g *= hyper_.lr;
      theta[i] -= g;  // θ = θ − η·(…)
    }
    return report;
  }

 private:
  std::string name_;
  core::AdamHyper<Real> hyper_;
  core::GateParams<Real> gate_;
  core::ZeroGatePolicy on_zero_gate_;
  Ages ages_rule_;
  std::vector<Real> m_;
  std::vector<Real> v_;
  std::vector<std::int64_t> t_;
  std::int64_t round_ = 0;               // rounds ended by advance_round()
  std::vector<std::int64_t> last_sync_;  // per fragment: the round of its last synchronization, −1 before any
};

}  // namespace cgad::reference
