#pragma once
// The one interface every reference outer optimizer implements: apply one pseudo-gradient event
// (Δ, τ, fragment) to parameters the caller owns, updating the optimizer's own state.
//
// apply() does everything the optimizers share, once: it checks lengths and indices (InputError, core's
// check_event, which the fast path makes too), and it
// refuses a pseudo-gradient with a NaN or Inf by returning a report with applied = false and touching
// nothing, like a GradScaler's found-inf step. Only then does it call the optimizer's step(). apply() stays in this
// header, compiled by its users: it compares and tests finiteness, and does no floating-point arithmetic (the
// optimizers' own is compiled in the reference library: optimizers.hpp, docs/design.md §2).
#include "cgad/core/errors.hpp"
#include "cgad/core/event_check.hpp"
#include "cgad/core/fragments.hpp"
#include "cgad/core/step_report.hpp"
#include "cgad/reference/real.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::reference {

template <core::RealScalar Real>
struct Event {
  std::span<const Real> grad;  // the pseudo-gradient of fragment `fragment` (the whole vector when P = 1)
  std::int64_t tau = 0;        // staleness in outer rounds, >= 0
  std::size_t fragment = 0;
};

// A read-only view of one named state buffer, for output and tests.
template <core::RealScalar Real>
struct StateBuffer {
  std::string name;
  std::span<const Real> values;
};

template <core::RealScalar Real>
class OuterOptimizer {
 public:
  explicit OuterOptimizer(core::FragmentLayout layout) : layout_(layout) {}
  virtual ~OuterOptimizer() = default;
  OuterOptimizer(const OuterOptimizer&) = default;
  OuterOptimizer& operator=(const OuterOptimizer&) = default;

  virtual std::string_view name() const = 0;
  const core::FragmentLayout& layout() const { return layout_; }

  core::StepReport<Real> apply(std::span<Real> params, const Event<Real>& event) {
    core::check_event(params.size(), event.grad.size(), event.tau, event.fragment, layout_.parameters(),
                      layout_.fragments(), [this](std::size_t f) { return layout_.size(f); });
    for (std::size_t i = 0; i < event.grad.size(); ++i) {
      if (!core::is_finite(event.grad[i])) {
        core::StepReport<Real> report;
        report.applied = false;
        report.reason = core::SkipReason::nonfinite_gradient;
        report.nonfinite_index = i;
        report.tau_effective = event.tau;
        report.sigma = Real(0);
        return report;
      }
    }
    return step(params.subspan(layout_.offset(event.fragment), event.grad.size()), event);
  }

  // Outer-round bookkeeping; only age-aware optimizers (PA-CGAD) keep any. See GatedAdam.
  virtual void advance_round() {}

  virtual std::vector<StateBuffer<Real>> buffers() const = 0;
  virtual std::vector<core::StateCounter> counters() const = 0;

 protected:
  // `slice` is the fragment's part of the parameters, of the same length as event.grad, all finite.
  virtual core::StepReport<Real> step(std::span<Real> slice, const Event<Real>& event) = 0;

 private:
  core::FragmentLayout layout_;
};

}  // namespace cgad::reference
