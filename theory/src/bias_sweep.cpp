#include "cgad/theory/bias_sweep.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/theory/constants.hpp"

namespace cgad::theory {

std::vector<SweepColumn> sweep_columns(bool with_real_update) {
  std::vector<SweepColumn> out;
  const core::GateKind gates[] = {core::GateKind::cosine, core::GateKind::exponential, core::GateKind::none};
  for (auto gate : gates) out.push_back({update_name(UpdateKind::ideal, gate), UpdateKind::ideal, gate});
  if (with_real_update) {
    for (auto gate : gates) out.push_back({update_name(UpdateKind::gated_adam, gate), UpdateKind::gated_adam, gate});
  }
  return out;
}

std::vector<long> sweep_tau_maxes(long tau_max) {
  std::vector<long> out;
  for (long k = 1; k < tau_max; k *= 2) out.push_back(k);
  out.push_back(tau_max);
  return out;
}

BiasSweep run_bias_sweep(const TrajectoryConfig& base, const std::string& alpha_text, long tau_max,
                         bool with_real_update, const std::function<void(long, long)>& on_progress) {
  if (tau_max < 0 || tau_max > kMaxTrajectoryTauMax) {
    throw core::InputError("tau-max must be an integer in [0, " + std::to_string(kMaxTrajectoryTauMax) + "], got " +
                           std::to_string(tau_max));
  }
  BiasSweep sweep;
  sweep.columns = sweep_columns(with_real_update);
  sweep.tau_maxes = sweep_tau_maxes(tau_max);
  // Refuse bad input before B1 (which assumes a valid α) and before the first run.
  for (const auto& column : sweep.columns) {
    TrajectoryConfig c = base;
    c.update = column.update;
    c.gate.kind = column.gate;
    c.tau_max = tau_max;
    validate_trajectory(c);
  }
  // The bias of an ideal CGAD run can never exceed B1: each σ_tτ_t ≤ sup τσ(τ). B1's certified upper end is
  // computed at the default 256 bits whatever the working precision: its bisection costs ~p^2.5.
  {
    const reference::PrecisionScope precision(reference::kDefaultPrecisionBits);
    const long cut = base.gate.tau_cut.convert_to<long>();
    sweep.b1_upper = certified_sup(1, Interval::from_decimal(alpha_text, "alpha"), cut).value.upper();
  }
  const long total = static_cast<long>(sweep.tau_maxes.size() * sweep.columns.size());
  long done = 0;
  sweep.reports.resize(sweep.columns.size());
  for (std::size_t i = 0; i < sweep.columns.size(); ++i) {
    for (long k : sweep.tau_maxes) {
      TrajectoryConfig c = base;
      c.update = sweep.columns[i].update;
      c.gate.kind = sweep.columns[i].gate;
      c.tau_max = k;
      sweep.reports[i].push_back(run_trajectory(c));
      if (on_progress) on_progress(++done, total);
    }
  }
  return sweep;
}

}  // namespace cgad::theory
