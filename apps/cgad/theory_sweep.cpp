#include "theory_sweep.hpp"

#include "progress.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/core/optimizer_options.hpp"
#include "cgad/theory/constants.hpp"

namespace cgad::cli {

using reference::mpfr_real;

theory::UpdateGate update_gate(const std::string& optimizer, const VerifyOptions& o) {
  core::GateKind kind;
  if (optimizer == "cgad") {
    kind = core::GateKind::cosine;
  } else if (optimizer == "adam-decay") {
    kind = core::GateKind::exponential;
  } else if (optimizer == "ungated") {
    kind = core::GateKind::none;
  } else {
    throw core::InputError("unknown optimizer '" + optimizer + "' (expected cgad|adam-decay|ungated)");
  }
  return {kind, core::parse_real<mpfr_real>(o.alpha, "alpha"), mpfr_real(o.tau_cut)};
}

theory::TrajectoryConfig trajectory_config(const VerifyOptions& o) {
  if (o.tau_cut < 1) throw core::InputError("tau-cut must be >= 1, got " + std::to_string(o.tau_cut));
  const theory::UpdateChoice choice = theory::parse_update(o.update);
  theory::TrajectoryConfig c;
  c.objective = theory::parse_objective_kind(o.objective);
  c.dimension = o.dimension;
  c.delays = theory::parse_delay_kind(o.delays);
  c.tau_max = o.tau_max;
  c.steps = o.steps;
  c.seed = o.seed;
  c.gate = update_gate(o.optimizer, o);
  c.update = choice.kind;
  if (choice.gate) {
    if (o.optimizer_given && c.gate.kind != *choice.gate) {
      throw core::InputError("--optimizer " + o.optimizer + " contradicts --update " + o.update +
                             " (--optimizer picks the ideal update's gate; the Adam update's gate is in its name)");
    }
    c.gate.kind = *choice.gate;
    // The β rule on the text as written (core/optimizer_options.hpp): the MPFR update forms 1 − β from the rounded β.
    c.adam.beta1 = core::parse_beta<mpfr_real>(o.beta1, "beta1", core::BetaComplement::of_rounded);
    c.adam.beta2 = core::parse_beta<mpfr_real>(o.beta2, "beta2", core::BetaComplement::of_rounded);
    c.adam.eps = core::parse_real<mpfr_real>(o.eps, "eps");
    if (o.on_zero_gate == "apply") {
      c.adam.on_zero_gate = core::ZeroGatePolicy::apply;
    } else if (o.on_zero_gate == "skip") {
      c.adam.on_zero_gate = core::ZeroGatePolicy::skip;
    } else {
      throw core::InputError("on-zero-gate must be apply or skip, got '" + o.on_zero_gate + "'");
    }
  }
  c.eta = core::parse_real<mpfr_real>(o.eta, "eta");
  c.noise = o.noise;
  theory::validate_trajectory(c);
  return c;
}

std::string run_name(const VerifyOptions& o) {
  const theory::TrajectoryConfig c = trajectory_config(o);
  return theory::update_name(c.update, c.gate.kind);
}

bool sweep_has_real_update(const VerifyOptions& o) {
  return theory::parse_update(o.update).kind != theory::UpdateKind::ideal;
}

theory::BiasSweep run_bias_sweep(const VerifyOptions& o) {
  const theory::TrajectoryConfig base = trajectory_config(o);
  ProgressBar bar("sweep");
  return theory::run_bias_sweep(base, o.alpha, o.tau_max, sweep_has_real_update(o),
                                [&](long done, long total) { bar.update(done, total); });
}

PlotFigure bias_sweep_plot(const VerifyOptions& o, const theory::BiasSweep& sweep) {
  const std::vector<double> ks(sweep.tau_maxes.begin(), sweep.tau_maxes.end());
  const bool real = sweep.columns.size() > 3;
  const std::string setting = o.objective + ", " + o.delays + " delays";
  const auto constant = [&](const std::string& title, double y, int style) {
    return PlotSeries{title, ks, std::vector<double>(ks.size(), y), false, style};
  };
  // Styles by gate (column k and k + 3 share one: the same gate, ideal or real), then the bounds'.
  constexpr int kB1Style = 3, kBoundStyle = 4;
  const PlotSeries b1 = constant("B1 (bounds ideal CGAD)", sweep.b1_upper.convert_to<double>(), kB1Style);
  const auto column = [&](std::size_t i, const std::string& title) {
    PlotSeries series{title, ks, {}, true, static_cast<int>(i % 3)};
    for (const auto& r : sweep.reports[i]) series.y.push_back((real ? r.realized_bias : r.bias).convert_to<double>());
    return series;
  };
  if (!real) {
    PlotSpec spec{"Staleness-bias term vs tau_max (" + setting + ")",
                  "tau_max",
                  "sum(sigma_t*tau_t)/T (log scale)",
                  true,
                  true,
                  {}};
    for (std::size_t i = 0; i < sweep.columns.size(); ++i) {
      spec.series.push_back(column(i, sweep.columns[i].name.substr(6)));  // "ideal cgad" -> "cgad"
    }
    spec.series.push_back(b1);
    const theory::Interval alpha = theory::Interval::from_decimal(o.alpha, "alpha");
    if (alpha.strictly_positive()) {  // 1/(eα) is +∞ at α = 0: nothing to draw
      spec.series.push_back(
          constant("1/(e*alpha) (Adam-Decay bound)",
                   (theory::Interval(1) / (theory::exp(theory::Interval(1)) * alpha)).upper().convert_to<double>(),
                   kBoundStyle));
    }
    return {{}, {spec}};
  }
  // With the real update: one panel per update, each gate once in it; the realized mean delay bounds every
  // column's realized term (step 2 with σ ≡ 1), the ungated ideal run's, drawn in both.
  PlotSeries mean{"mean tau (bounds every update)", ks, {}, false, kBoundStyle};
  for (const auto& r : sweep.reports[2]) mean.y.push_back(r.mean_tau.convert_to<double>());
  const std::string ylabel = "R_T/(L*eta^2*G_run^2*T) (log scale)";
  PlotFigure figure{"Realized staleness-bias term vs tau_max (" + setting + ")",
                    {{"ideal updates", "tau_max", ylabel, true, true, {}},
                     {"real updates (the gate in front of Adam)", "tau_max", ylabel, true, true, {}}}};
  for (std::size_t i = 0; i < sweep.columns.size(); ++i) {
    const std::string& name = sweep.columns[i].name;
    figure.panels[i < 3 ? 0 : 1].series.push_back(column(i, i < 3 ? name.substr(6) : name));  // the panel says ideal
  }
  figure.panels[0].series.push_back(b1);
  for (PlotSpec& panel : figure.panels) panel.series.push_back(mean);
  return figure;
}

}  // namespace cgad::cli
