// `Schedule`: an optimizer configuration's staleness schedule, bound once (docs/design.md §3, §5): σ(τ) as the step
// scales an event by, whether the gate is zero at τ, the order in which a NaN/Inf, on_zero_gate's drop of a zero-gate
// event and an overflow decide it, and the overflow rule's refusal magnitude.
// cgad.torch.Gated keeps one for its σ, its zero-gate decision and its outcome, and each cgad.torch param group one for
// its report's "zero-gate", so that Python never re-derives the gate nor restates the rule's constant.
//
// It is the fast path's own planner (StepPlanner::prepare, step_planner.hpp), built once from the configuration, so
// σ is the very float the step uses. Its planner is built with on_zero_gate = skip, under which the event says whether
// γ(τ) = 0 at every τ (StepEvent::zero_gate_tau); the user's policy only decides whether such an event is dropped.
#include "bindings.hpp"

#include "cgad/core/overflow_rule.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace py = pybind11;

namespace cgad::python {
namespace {

fastpath::StepConfig deciding_zero_gates(fastpath::StepConfig config) {
  config.on_zero_gate = core::ZeroGatePolicy::skip;
  return config;
}

class Schedule {
 public:
  explicit Schedule(const py::dict& spec) : Schedule(spec, step_config(spec)) {}

  float sigma(std::int64_t tau) const { return event(tau).sigma_tau; }
  bool zero_gate(std::int64_t tau) const { return event(tau).zero_gate_tau; }
  bool skips(std::int64_t tau) const { return skip_ && zero_gate(tau); }
  // What becomes of an event at τ whose pseudo-gradient holds a NaN/Inf or an overflowing σ·Δ: the step's own order
  // of the refusals and the zero gate (step_schedule.hpp's outcome_of), as the reason a step report gives.
  std::string_view outcome(std::int64_t tau, bool nonfinite, bool overflowing) const {
    fastpath::ScheduledStep scheduled;
    scheduled.applied = !skips(tau);
    const fastpath::StepOutcome outcome = fastpath::outcome_of(scheduled, nonfinite, overflowing);
    return core::to_string(fastpath::StepPlanner::report_of({}, scheduled, outcome, 0).reason);
  }
  const py::dict& spec() const { return spec_; }

 private:
  Schedule(const py::dict& spec, const fastpath::StepConfig& config)
      : spec_(py::dict(spec)),
        skip_(config.on_zero_gate == core::ZeroGatePolicy::skip),
        // One element per fragment: the smallest layout the configuration takes (PA-CGAD's fragments are not empty).
        planner_(deciding_zero_gates(config), std::vector<std::size_t>{config.fragments}) {}

  // InputError for τ < 0, as a step's. The events of small τ -- all a run meets, mostly -- are kept once prepared:
  // the planner evaluates the gate in long double at every call (about 1 µs; a kept one is read in 0.2-0.4 µs).
  // Called with the GIL held (no binding releases it), so the cache needs no lock.
  fastpath::StepEvent event(std::int64_t tau) const {
    const bool kept = tau >= 0 && tau < kKept;
    if (kept && static_cast<std::size_t>(tau) < events_.size() && events_[tau].has_value()) return *events_[tau];
    const fastpath::StepEvent e = planner_.prepare(planner_.parameters(), planner_.fragment_size(0), tau, 0).event;
    if (kept) {
      if (events_.size() <= static_cast<std::size_t>(tau)) events_.resize(tau + 1);
      events_[tau] = e;
    }
    return e;
  }

  static constexpr std::int64_t kKept = 4096;
  py::dict spec_;  // a copy, for pickling
  bool skip_;
  fastpath::StepPlanner planner_;
  mutable std::vector<std::optional<fastpath::StepEvent>> events_;
};

}  // namespace

void bind_schedule(py::module_& m) {
  py::class_<Schedule>(m, "Schedule")
      .def(py::init<const py::dict&>(), py::arg("spec"))
      // σ(τ) as a Python float holding the step's float32 exactly.
      .def(
          "sigma", [](const Schedule& s, std::int64_t tau) { return static_cast<double>(s.sigma(tau)); },
          py::arg("tau"))
      .def("zero_gate", &Schedule::zero_gate, py::arg("tau"), "γ(τ) = 0: the cosine gate at τ >= tau_cut")
      .def(
          "outcome",
          [](const Schedule& s, std::int64_t tau, bool nonfinite, bool overflowing) {
            return std::string(s.outcome(tau, nonfinite, overflowing));
          },
          py::arg("tau"), py::arg("nonfinite"), py::arg("overflowing"),
          "'none', 'nonfinite-gradient', 'zero-gate' or 'overflowing-gradient'")
      .def_property_readonly_static(
          "refused_magnitude", [](const py::object&) { return std::ldexp(1.0, core::kRefusedGradientExponent); },
          "the overflow rule's threshold on |σ·Δ| (core/overflow_rule.hpp)")
      .def(py::pickle([](const Schedule& s) { return py::make_tuple(s.spec()); },
                      [](const py::tuple& t) { return Schedule(t[0].cast<py::dict>()); }));
}

}  // namespace cgad::python
