// `cgad verify-bound`: runs the ideal gated update of DESIGN.md §6 in MPFR on an objective with proven L and
// f*, under a delay schedule, and checks the summed inequality at every T; `--sweep-tau-max` shows the
// realized staleness-bias term Σσ_tτ_t/T flat in τ_max for CGAD and Adam-Decay and growing when ungated.
#include "cli_support.hpp"
#include "commands.hpp"
#include "plot.hpp"
#include "progress.hpp"
#include "theory_sweep.hpp"

#include "cgad/theory/constants.hpp"
#include "cgad/theory/trajectory.hpp"

#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>
#include <memory>
#include <stdexcept>

namespace cgad::cli {
namespace {

using reference::mpfr_real;

std::string dec(const mpfr_real& x) { return reference::to_decimal(x, 20); }
std::string when(const std::optional<long>& T) { return T ? "T = " + std::to_string(*T) : "none"; }

nlohmann::json report_json(const theory::TrajectoryReport& r) {
  auto form = [](const theory::InequalityState& s, bool claimed) {
    return nlohmann::json{{"lhs", dec(s.lhs)},
                          {"rhs", dec(s.rhs)},
                          {"claimed", claimed},
                          {"first_violation", s.first_violation ? nlohmann::json(*s.first_violation) : nullptr}};
  };
  return {{"L", dec(r.L)},
          {"f_star", dec(r.f_star)},
          {"G", dec(r.G)},
          {"rho", dec(r.rho)},
          {"eta", dec(r.eta)},
          {"noise", dec(r.noise)},
          {"f0", dec(r.f0)},
          {"f_final", dec(r.f_final)},
          {"steps", r.steps},
          {"realized_tau_max", r.realized_tau_max},
          {"adversarial_tau", r.adversarial_tau},
          {"bias", dec(r.bias)},
          {"sum_sigma_tau", dec(r.sum_sigma_tau)},
          {"sum_sigma_squared", dec(r.sum_sigma_squared)},
          {"clipped_steps", r.clipped_steps},
          {"alignment_failure_step", r.alignment_failure ? nlohmann::json(*r.alignment_failure) : nullptr},
          {"descent_form", form(r.descent, true)},
          {"design_form", form(r.design, !r.alignment_failure)}};
}

// A violated claimed inequality is a defect in cgad (or in the theorem): say so after the report, exit 1.
void fail_on_violation(const theory::TrajectoryReport& r, const std::string& what) {
  if (r.descent.first_violation || (!r.alignment_failure && r.design.first_violation)) {
    throw std::runtime_error("summed inequality violated (" + what + "): descent form " +
                             when(r.descent.first_violation) + ", design form " + when(r.design.first_violation));
  }
}

void run_single(const VerifyOptions& o, unsigned bits) {
  const theory::TrajectoryConfig config = trajectory_config(o, o.optimizer, o.tau_max);
  // Keep about 400 evenly spaced points of the two forms for the figure and the JSON series.
  const long every = std::max(1L, o.steps / 400);
  std::vector<double> Ts, descent_lhs, descent_rhs, design_lhs, design_rhs;
  nlohmann::json series = nlohmann::json::array();
  theory::TrajectoryReport r;
  {
    ProgressBar bar("verify-bound");
    r = theory::run_trajectory(
        config,
        [&](const theory::TrajectoryPoint& p) {
          if (p.T % every != 0 && p.T != o.steps) return;
          Ts.push_back(static_cast<double>(p.T));
          descent_lhs.push_back(p.descent->lhs.convert_to<double>());
          descent_rhs.push_back(p.descent->rhs.convert_to<double>());
          design_lhs.push_back(p.design->lhs.convert_to<double>());
          design_rhs.push_back(p.design->rhs.convert_to<double>());
          if (o.json) {
            series.push_back({{"T", p.T}, {"descent_lhs", dec(p.descent->lhs)}, {"descent_rhs", dec(p.descent->rhs)},
                              {"design_lhs", dec(p.design->lhs)}, {"design_rhs", dec(p.design->rhs)},
                              {"bias", dec(p.bias)}});
          }
        },
        [&](long done, long total) { bar.update(done, total); });
  }
  if (o.json) {
    nlohmann::json out = report_json(r);
    out["objective"] = o.objective;
    out["delays"] = o.delays;
    out["optimizer"] = o.optimizer;
    out["tau_max"] = o.tau_max;
    out["seed"] = o.seed;
    out["alpha"] = o.alpha;
    out["tau_cut"] = o.tau_cut;
    out["precision_bits"] = bits;
    out["series"] = series;
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "Ideal gated update x_{t+1} = x_t - eta*sigma(tau_t)*u_t  (" << bits << "-bit MPFR)\n"
              << "  objective " << o.objective << " (d = " << o.dimension << ")  delays " << o.delays
              << "  tau_max " << o.tau_max << "  optimizer " << o.optimizer << "  alpha " << o.alpha << "  tau_cut "
              << o.tau_cut << "  seed " << o.seed << "\n"
              << "  L = " << dec(r.L) << "  f* = " << dec(r.f_star) << "  G = " << dec(r.G) << "  rho = " << dec(r.rho)
              << "  eta = " << dec(r.eta) << "\n"
              << "  steps T = " << r.steps << "  realized max tau = " << r.realized_tau_max
              << "  adversarial tau = argmax tau*sigma(tau) = " << r.adversarial_tau << "  clipped steps = "
              << r.clipped_steps << "\n"
              << "  f(x_0) = " << dec(r.f0) << "  f(x_T) = " << dec(r.f_final) << "\n"
              << "  staleness-bias term sum(sigma_t*tau_t)/T = " << dec(r.bias) << "\n\n"
              << "  descent form  sum sigma_t<grad_{t-tau},u_t> <= (f0 - f(x_T))/eta + L*eta*G^2*sum(sigma*tau + "
                 "sigma^2/2)\n"
              << "    at T: lhs " << dec(r.descent.lhs) << "  rhs " << dec(r.descent.rhs)
              << "\n    first violation: " << when(r.descent.first_violation) << "\n"
              << "  DESIGN.md 6 form  rho*sum sigma_t*|grad_{t-tau}|^2 <= (f0 - f*)/eta + L*eta*G^2*sum(sigma*tau + "
                 "sigma^2/2)\n"
              << "    at T: lhs " << dec(r.design.lhs) << "  rhs " << dec(r.design.rhs)
              << "\n    first violation: " << when(r.design.first_violation)
              << (r.alignment_failure ? "  (NOT claimed from step " + std::to_string(*r.alignment_failure) +
                                            ": clipping broke the alignment hypothesis)"
                                      : "  (alignment held at every step)")
              << "\n";
  }
  if (!o.plot.empty()) {
    plot_png(o.plot, PlotSpec{"Summed inequality, " + o.objective + ", " + o.delays + " delays, " + o.optimizer,
                              "T",
                              "value",
                              false,
                              true,
                              {{"descent form: lhs", Ts, descent_lhs, false},
                               {"descent form: rhs", Ts, descent_rhs, false},
                               {"DESIGN form: lhs", Ts, design_lhs, false},
                               {"DESIGN form: rhs", Ts, design_rhs, false}}});
  }
  fail_on_violation(r, o.optimizer);
}

void run_sweep(const VerifyOptions& o, unsigned bits) {
  const BiasSweep sweep = run_bias_sweep(o);
  const std::string b1_hi = theory::decimal_up(sweep.b1_upper, 20);
  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t row = 0; row < sweep.tau_maxes.size(); ++row) {
      nlohmann::json entry{{"tau_max", sweep.tau_maxes[row]}};
      for (std::size_t i = 0; i < std::size(kSweepOptimizers); ++i) {
        const theory::TrajectoryReport& r = sweep.reports[i][row];
        entry[kSweepOptimizers[i]] = {
            {"bias", dec(r.bias)},
            {"descent_violation", r.descent.first_violation ? nlohmann::json(*r.descent.first_violation) : nullptr},
            {"design_violation", r.design.first_violation && !r.alignment_failure
                                     ? nlohmann::json(*r.design.first_violation)
                                     : nullptr}};
      }
      rows.push_back(entry);
    }
    std::cout << nlohmann::json{{"objective", o.objective}, {"delays", o.delays},   {"steps", o.steps},
                                {"seed", o.seed},           {"alpha", o.alpha},     {"tau_cut", o.tau_cut},
                                {"precision_bits", bits},   {"B1_upper", b1_hi},    {"rows", rows}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "Realized staleness-bias term sum(sigma_t*tau_t)/T vs tau_max  (" << o.objective << ", " << o.delays
              << " delays, T = " << o.steps << ", seed " << o.seed << ", alpha " << o.alpha << ", tau_cut "
              << o.tau_cut << ")\n  B1 <= " << b1_hi << " bounds every CGAD entry; 1/(e*alpha) bounds Adam-Decay\n"
              << std::setw(10) << "tau_max" << std::setw(16) << "cgad" << std::setw(16) << "adam-decay" << std::setw(16)
              << "ungated" << "\n";
    for (std::size_t row = 0; row < sweep.tau_maxes.size(); ++row) {
      std::cout << std::setw(10) << sweep.tau_maxes[row];
      for (std::size_t i = 0; i < std::size(kSweepOptimizers); ++i) {
        std::cout << std::setw(16) << std::setprecision(8) << sweep.reports[i][row].bias.convert_to<double>();
      }
      std::cout << "\n";
    }
  }
  if (!o.plot.empty()) plot_png(o.plot, bias_sweep_plot(o, sweep));
  for (std::size_t i = 0; i < std::size(kSweepOptimizers); ++i) {
    for (std::size_t row = 0; row < sweep.tau_maxes.size(); ++row) {
      fail_on_violation(sweep.reports[i][row],
                        std::string(kSweepOptimizers[i]) + ", tau_max " + std::to_string(sweep.tau_maxes[row]));
    }
  }
}

void run_verify(const VerifyOptions& o) {
  const unsigned bits = apply_precision(o.precision);
  if (!o.plot.empty()) check_plot_target(o.plot);
  if (o.sweep) {
    run_sweep(o, bits);
  } else {
    run_single(o, bits);
  }
}

}  // namespace

void add_verify_bound_command(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* command = app.add_subcommand(
      "verify-bound", "Run the ideal gated update in MPFR and check the summed convergence inequality at every T");
  command->add_option("--objective", o->objective, theory::kObjectiveKindNames)->capture_default_str();
  command->add_option("--delays", o->delays, theory::kDelayKindNames)->capture_default_str();
  command->add_option("--tau-max", o->tau_max, "largest delay the schedule may produce")->capture_default_str();
  command->add_option("--steps", o->steps, "number of updates T")->capture_default_str();
  command->add_option("--seed", o->seed, "seed of objective data, x_0, delays and noise")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--optimizer", o->optimizer, "cgad|adam-decay|ungated")->capture_default_str();
  command->add_option("--alpha", o->alpha, "gate decay alpha >= 0")->capture_default_str();
  command->add_option("--tau-cut", o->tau_cut, "cosine cutoff tau_cut (integer >= 1)")->capture_default_str();
  command->add_option("--eta", o->eta, "step size eta > 0")->capture_default_str();
  command->add_option("--dim", o->dimension, "dimension d of the objective")->capture_default_str();
  command->add_option("--noise", o->noise, "multiplicative gradient-noise level s in [0,1) (default: objective's)");
  command->add_flag("--json", o->json, "print JSON instead of a report");
  command->add_option("--plot", o->plot, "write a PNG figure (needs gnuplot)");
  command->add_flag("--sweep-tau-max", o->sweep,
                    "run tau_max = 1, 2, 4, ..., --tau-max for cgad, adam-decay and ungated; table of the bias term");
  add_precision_option(*command, o->precision);
  command->callback([o] { run_verify(*o); });
}

}  // namespace cgad::cli
