#include "cgad/theory/interval_gate.hpp"

#include <stdexcept>

namespace cgad::theory {

namespace {
void require_inside(const Interval& tau, long tau_cut, bool open) {
  const auto lo = tau.lower();
  const auto hi = tau.upper();
  const bool ok = open ? (lo > 0 && hi < tau_cut) : (lo >= 0 && hi <= tau_cut);
  if (!ok) throw std::logic_error("interval gate: tau outside the gate's domain");
}
}  // namespace

Interval sigma_enclosure(const Interval& tau, const IntervalGate& gate) {
  require_inside(tau, gate.tau_cut, false);
  const Interval cut(gate.tau_cut);
  // The sine form, as in core::gamma: τ_cut − τ is exact for point τ, and sin has no cancellation.
  const Interval angle = Interval::pi() * (cut - tau) / (Interval(2) * cut);
  return square(sin(angle)) * exp(-(gate.alpha * tau));
}

Interval weighted_sigma_enclosure(const Interval& tau, unsigned k, const IntervalGate& gate) {
  // τ ≥ 0 here, so the k-fold product pow() forms is as tight as τ^k itself.
  return pow(tau, k) * sigma_enclosure(tau, gate);
}

Interval log_weight_derivative(const Interval& tau, unsigned k, const IntervalGate& gate) {
  require_inside(tau, gate.tau_cut, true);
  const Interval cut(gate.tau_cut);
  const Interval pi = Interval::pi();
  const Interval slope = pi / cut * tan(pi * tau / (Interval(2) * cut));
  return Interval(static_cast<long>(k)) / tau - gate.alpha - slope;
}

}  // namespace cgad::theory
