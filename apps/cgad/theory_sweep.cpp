#include "theory_sweep.hpp"

#include "progress.hpp"

#include "cgad/theory/constants.hpp"

namespace cgad::cli {

using reference::mpfr_real;

theory::UpdateGate update_gate(const std::string& optimizer, const VerifyOptions& o) {
  reference::GateKind kind;
  if (optimizer == "cgad") {
    kind = reference::GateKind::cosine;
  } else if (optimizer == "adam-decay") {
    kind = reference::GateKind::exponential;
  } else if (optimizer == "ungated") {
    kind = reference::GateKind::none;
  } else {
    throw reference::InputError("unknown optimizer '" + optimizer + "' (expected cgad|adam-decay|ungated)");
  }
  return {kind, reference::parse_real<mpfr_real>(o.alpha, "alpha"), mpfr_real(o.tau_cut)};
}

theory::TrajectoryConfig trajectory_config(const VerifyOptions& o, const std::string& optimizer, long tau_max) {
  if (o.tau_cut < 1) throw reference::InputError("tau-cut must be >= 1, got " + std::to_string(o.tau_cut));
  theory::TrajectoryConfig c;
  c.objective = theory::parse_objective_kind(o.objective);
  c.dimension = o.dimension;
  c.delays = theory::parse_delay_kind(o.delays);
  c.tau_max = tau_max;
  c.steps = o.steps;
  c.seed = o.seed;
  c.gate = update_gate(optimizer, o);
  c.eta = reference::parse_real<mpfr_real>(o.eta, "eta");
  c.noise = o.noise;
  return c;
}

BiasSweep run_bias_sweep(const VerifyOptions& o) {
  BiasSweep sweep;
  for (long k = 1; k < o.tau_max; k *= 2) sweep.tau_maxes.push_back(k);
  sweep.tau_maxes.push_back(o.tau_max);
  // Refuse bad input before B1 (which assumes a valid α) and before the first run.
  reference::validate(trajectory_config(o, "cgad", o.tau_max).gate);
  // The bias of a CGAD run can never exceed B1: each σ_tτ_t ≤ sup τσ(τ). B1's certified upper end is computed
  // at the default 256 bits whatever the working precision: its bisection costs ~p^2.5 (theory/README §6).
  const unsigned bits = reference::working_precision_bits();
  reference::set_working_precision_bits(reference::kDefaultPrecisionBits);
  sweep.b1_upper = theory::certified_sup(1, theory::Interval::from_decimal(o.alpha, "alpha"), o.tau_cut).value.upper();
  reference::set_working_precision_bits(bits);
  ProgressBar bar("sweep");
  const long total = static_cast<long>(sweep.tau_maxes.size() * std::size(kSweepOptimizers));
  long done = 0;
  sweep.reports.resize(std::size(kSweepOptimizers));
  for (std::size_t i = 0; i < std::size(kSweepOptimizers); ++i) {
    for (long k : sweep.tau_maxes) {
      sweep.reports[i].push_back(theory::run_trajectory(trajectory_config(o, kSweepOptimizers[i], k)));
      bar.update(++done, total);
    }
  }
  return sweep;
}

PlotSpec bias_sweep_plot(const VerifyOptions& o, const BiasSweep& sweep) {
  const std::vector<double> ks(sweep.tau_maxes.begin(), sweep.tau_maxes.end());
  PlotSpec spec{"Staleness-bias term vs tau_max (" + o.objective + ", " + o.delays + " delays)",
                "tau_max", "sum(sigma_t*tau_t)/T (log scale)", true, true, {}};
  for (std::size_t i = 0; i < std::size(kSweepOptimizers); ++i) {
    std::vector<double> bias;
    for (const auto& r : sweep.reports[i]) bias.push_back(r.bias.convert_to<double>());
    spec.series.push_back({kSweepOptimizers[i], ks, bias, true});
  }
  spec.series.push_back({"B1 (CGAD bound)", ks, std::vector<double>(ks.size(), sweep.b1_upper.convert_to<double>()), false});
  const theory::Interval alpha = theory::Interval::from_decimal(o.alpha, "alpha");
  if (alpha.strictly_positive()) {  // 1/(eα) is +∞ at α = 0: nothing to draw
    const double inv_e_alpha =
        (theory::Interval(1) / (theory::exp(theory::Interval(1)) * alpha)).upper().convert_to<double>();
    spec.series.push_back({"1/(e*alpha) (Adam-Decay bound)", ks, std::vector<double>(ks.size(), inv_e_alpha), false});
  }
  return spec;
}

}  // namespace cgad::cli
