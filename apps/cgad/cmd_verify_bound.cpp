// `cgad verify-bound`: runs the ideal gated update of docs/design.md §6 — or, with --update
// cgad-adam|adam-decay-adam|adam, the real gated-moment Adam update of the reference — in MPFR on an objective with
// proven L and f*, under a delay schedule, and checks the inequalities of theory/trajectory.hpp at every T;
// `--sweep-tau-max` shows the staleness-bias term against τ_max (the ideal update's Σσ_tτ_t/T, and the realized
// R_T/(Lη²G_run²T) of every update). The engines are theory/'s; this file parses, calls and prints.
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

std::string dec(const mpfr_real& x) {
  return core::to_decimal(x, 20);
}
std::string when(const std::optional<long>& T) {
  return T ? "T = " + std::to_string(*T) : "none";
}

nlohmann::json report_json(const theory::TrajectoryReport& r) {
  auto form = [](const theory::InequalityState& s, bool claimed) {
    return nlohmann::json{{"lhs", dec(s.lhs)},
                          {"rhs", dec(s.rhs)},
                          {"claimed", claimed},
                          {"first_violation", s.first_violation ? nlohmann::json(*s.first_violation) : nullptr}};
  };
  const bool ideal = r.ideal_forms_claimed;
  return {{"update_kind", ideal ? "ideal" : "gated-moment adam"},
          {"L", dec(r.L)},
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
          {"descent_form", form(r.descent, ideal)},
          {"design_form", form(r.design, ideal && !r.alignment_failure)},
          {"realized_form", form(r.realized, true)},
          {"realized_bias_sum", dec(r.realized_bias_sum)},
          {"step_bound_G_run", dec(r.step_bound)},
          {"realized_bias", dec(r.realized_bias)},
          {"mean_tau", dec(r.mean_tau)},
          {"min_alignment", r.min_alignment ? nlohmann::json(dec(*r.min_alignment)) : nullptr},
          {"unaligned_steps", r.unaligned_steps},
          {"refused_steps", r.refused_steps},
          {"idle_steps", r.idle_steps}};
}

// A violated claimed inequality is a defect in cgad (or in the theorem): say so after the report, exit 1.
bool violated(const theory::TrajectoryReport& r) {
  return r.realized.first_violation ||
         (r.ideal_forms_claimed && (r.descent.first_violation || (!r.alignment_failure && r.design.first_violation)));
}

void fail_on_violation(const theory::TrajectoryReport& r, const std::string& what) {
  if (violated(r)) {
    throw std::runtime_error("summed inequality violated (" + what + "): descent form " +
                             when(r.descent.first_violation) + ", design form " + when(r.design.first_violation) +
                             ", realized form " + when(r.realized.first_violation));
  }
}

void print_realized(const theory::TrajectoryReport& r) {
  std::cout << "  realized form  sum <grad_{t-tau}, x_t - x_{t+1}> <= f0 - f(x_T) + R_T + (L/2)*sum |x_{t+1} - x_t|^2"
               "  (any update, L-smoothness only)\n"
            << "    at T: lhs " << dec(r.realized.lhs) << "  rhs " << dec(r.realized.rhs)
            << "\n    first violation: " << when(r.realized.first_violation) << "\n"
            << "  staleness-bias term R_T = sum_t L*|x_t - x_{t-tau_t}|*|x_{t+1} - x_t| = " << dec(r.realized_bias_sum)
            << "\n  G_run = max_t |u_t| = " << dec(r.step_bound)
            << "\n  normalized R_T/(L*eta^2*G_run^2*T) = " << dec(r.realized_bias)
            << "   (<= mean tau = " << dec(r.mean_tau) << " for every update"
            << (r.ideal_forms_claimed ? "; <= sum(sigma*tau)/T = " + dec(r.bias) + " for the ideal update)" : ")")
            << "\n  A4 along the run: min <grad_{t-tau}, u_t>/|grad_{t-tau}|^2 = "
            << (r.min_alignment ? dec(*r.min_alignment) : std::string("n/a (every gradient 0)"))
            << ";  steps with <grad, u_t> < 0 (A4 false for every rho >= 0): " << r.unaligned_steps << "\n";
}

void run_single(const VerifyOptions& o, unsigned bits) {
  const theory::TrajectoryConfig config = trajectory_config(o);
  const bool ideal = config.update == theory::UpdateKind::ideal;
  const std::string name = theory::update_name(config.update, config.gate.kind);
  // Keep about 400 evenly spaced points of the forms for the figure and the JSON series.
  const long every = std::max(1L, o.steps / 400);
  std::vector<double> Ts, descent_lhs, descent_rhs, design_lhs, design_rhs, realized_lhs, realized_rhs;
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
          realized_lhs.push_back(p.realized->lhs.convert_to<double>());
          realized_rhs.push_back(p.realized->rhs.convert_to<double>());
          if (o.json) {
            nlohmann::json point{{"T", p.T},
                                 {"bias", dec(p.bias)},
                                 {"realized_bias_sum", dec(p.realized_bias_sum)},
                                 {"realized_lhs", dec(p.realized->lhs)},
                                 {"realized_rhs", dec(p.realized->rhs)}};
            if (ideal) {
              point["descent_lhs"] = dec(p.descent->lhs);
              point["descent_rhs"] = dec(p.descent->rhs);
              point["design_lhs"] = dec(p.design->lhs);
              point["design_rhs"] = dec(p.design->rhs);
            }
            series.push_back(point);
          }
        },
        [&](long done, long total) { bar.update(done, total); });
  }
  if (o.json) {
    nlohmann::json out = report_json(r);
    out["objective"] = o.objective;
    out["delays"] = o.delays;
    out["update"] = o.update;
    out["run"] = name;
    out["optimizer"] = ideal ? nlohmann::json(o.optimizer) : nlohmann::json(nullptr);
    out["tau_max"] = o.tau_max;
    out["seed"] = o.seed;
    out["alpha"] = o.alpha;
    out["tau_cut"] = o.tau_cut;
    if (!ideal) {
      out["beta1"] = o.beta1;
      out["beta2"] = o.beta2;
      out["eps"] = o.eps;
      out["on_zero_gate"] = o.on_zero_gate;
    }
    out["precision_bits"] = bits;
    out["series"] = series;
    std::cout << out.dump(2) << "\n";
  } else {
    if (ideal) {
      std::cout << "Ideal gated update x_{t+1} = x_t - eta*sigma(tau_t)*u_t  (" << bits << "-bit MPFR)\n";
    } else {
      std::cout << "Real gated-moment Adam update (reference " << name << ", gate inside m and v): x_{t+1} = x_t - "
                << "eta*m^/(sqrt(v^)+eps)  (" << bits << "-bit MPFR)\n  beta1 " << o.beta1 << "  beta2 " << o.beta2
                << "  eps " << o.eps << "  on zero gate: " << o.on_zero_gate
                << "  (the ideal theorem's forms are not claimed for this update)\n";
    }
    std::cout << "  objective " << o.objective << " (d = " << o.dimension << ")  delays " << o.delays << "  tau_max "
              << o.tau_max << "  update " << name << "  alpha " << o.alpha << "  tau_cut " << o.tau_cut << "  seed "
              << o.seed << "\n"
              << "  L = " << dec(r.L) << "  f* = " << dec(r.f_star);
    if (ideal) std::cout << "  G = " << dec(r.G) << "  rho = " << dec(r.rho);
    std::cout << "  eta = " << dec(r.eta) << "\n"
              << "  steps T = " << r.steps << "  realized max tau = " << r.realized_tau_max
              << "  adversarial tau = argmax tau*sigma(tau) = " << r.adversarial_tau;
    if (ideal) std::cout << "  clipped steps = " << r.clipped_steps;
    if (!ideal) std::cout << "  refused/skipped events = " << r.refused_steps;
    if (r.idle_steps > 0) std::cout << "  idle steps (before the first arrival) = " << r.idle_steps;
    std::cout << "\n"
              << "  f(x_0) = " << dec(r.f0) << "  f(x_T) = " << dec(r.f_final) << "\n"
              << "  sum(sigma_t*tau_t)/T = " << dec(r.bias)
              << (ideal ? "  (the ideal update's bound on the staleness-bias term, / (L*eta^2*G^2*T))" : "") << "\n\n";
    if (ideal) {
      std::cout
          << "  descent form  sum sigma_t<grad_{t-tau},u_t> <= (f0 - f(x_T))/eta + L*eta*G^2*sum(sigma*tau + "
             "sigma^2/2)\n"
          << "    at T: lhs " << dec(r.descent.lhs) << "  rhs " << dec(r.descent.rhs)
          << "\n    first violation: " << when(r.descent.first_violation) << "\n"
          << "  docs/design.md 6 form  rho*sum sigma_t*|grad_{t-tau}|^2 <= (f0 - f*)/eta + L*eta*G^2*sum(sigma*tau + "
             "sigma^2/2)\n"
          << "    at T: lhs " << dec(r.design.lhs) << "  rhs " << dec(r.design.rhs)
          << "\n    first violation: " << when(r.design.first_violation)
          << (r.alignment_failure ? "  (NOT claimed from step " + std::to_string(*r.alignment_failure) +
                                        ": clipping broke the alignment hypothesis)"
                                  : "  (alignment held at every step)")
          << "\n";
    }
    print_realized(r);
  }
  if (!o.plot.empty()) {
    PlotSpec spec{
        "Summed inequality, " + o.objective + ", " + o.delays + " delays, " + name, "T", "value", false, true, {}};
    auto add = [&](const std::string& title, const std::vector<double>& y) {
      PlotSeries line;
      line.title = title;
      line.x = Ts;
      line.y = y;
      line.points = false;
      spec.series.push_back(line);
    };
    if (ideal) {
      add("descent form: lhs", descent_lhs);
      add("descent form: rhs", descent_rhs);
      add("DESIGN form: lhs", design_lhs);
      add("DESIGN form: rhs", design_rhs);
    }
    add("realized form: lhs", realized_lhs);
    add("realized form: rhs", realized_rhs);
    plot_png(o.plot, spec);
  }
  fail_on_violation(r, name);
}

void print_column_table(const theory::BiasSweep& sweep, bool realized, bool with_mean) {
  std::cout << std::setw(10) << "tau_max";
  for (const auto& column : sweep.columns) {
    if (!realized && column.update != theory::UpdateKind::ideal) continue;
    std::cout << std::setw(18) << column.name;
  }
  if (with_mean) std::cout << std::setw(18) << "mean tau";
  std::cout << "\n";
  for (std::size_t row = 0; row < sweep.tau_maxes.size(); ++row) {
    std::cout << std::setw(10) << sweep.tau_maxes[row];
    for (std::size_t i = 0; i < sweep.columns.size(); ++i) {
      if (!realized && sweep.columns[i].update != theory::UpdateKind::ideal) continue;
      const theory::TrajectoryReport& r = sweep.reports[i][row];
      std::cout << std::setw(18) << std::setprecision(8) << (realized ? r.realized_bias : r.bias).convert_to<double>();
    }
    // The delays, hence the mean, are the same for every column except the adversarial schedule's, whose τ
    // depends on the gate: the ungated ideal run's is shown (the largest).
    if (with_mean)
      std::cout << std::setw(18) << std::setprecision(8) << sweep.reports[2][row].mean_tau.convert_to<double>();
    std::cout << "\n";
  }
}

void run_sweep(const VerifyOptions& o, unsigned bits) {
  const theory::BiasSweep sweep = run_bias_sweep(o);
  const std::string b1_hi = theory::decimal_up(sweep.b1_upper, 20);
  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t row = 0; row < sweep.tau_maxes.size(); ++row) {
      nlohmann::json entry{{"tau_max", sweep.tau_maxes[row]}};
      for (std::size_t i = 0; i < sweep.columns.size(); ++i) {
        const theory::TrajectoryReport& r = sweep.reports[i][row];
        const bool ideal = r.ideal_forms_claimed;
        // The ideal columns keep their old keys (cgad, adam-decay, ungated); the Adam ones are named as --update.
        const std::string key = ideal ? sweep.columns[i].name.substr(6) : sweep.columns[i].name;
        entry[key] = {
            {"bias", dec(r.bias)},
            {"realized_bias", dec(r.realized_bias)},
            {"realized_bias_sum", dec(r.realized_bias_sum)},
            {"step_bound_G_run", dec(r.step_bound)},
            {"mean_tau", dec(r.mean_tau)},
            {"min_alignment", r.min_alignment ? nlohmann::json(dec(*r.min_alignment)) : nullptr},
            {"unaligned_steps", r.unaligned_steps},
            {"descent_violation",
             ideal && r.descent.first_violation ? nlohmann::json(*r.descent.first_violation) : nullptr},
            {"design_violation", ideal && r.design.first_violation && !r.alignment_failure
                                     ? nlohmann::json(*r.design.first_violation)
                                     : nullptr},
            {"realized_violation", r.realized.first_violation ? nlohmann::json(*r.realized.first_violation) : nullptr}};
      }
      rows.push_back(entry);
    }
    nlohmann::json columns = nlohmann::json::array();
    for (const auto& column : sweep.columns) columns.push_back(column.name);
    std::cout << nlohmann::json{{"objective", o.objective}, {"delays", o.delays}, {"steps", o.steps},
                                {"seed", o.seed},           {"alpha", o.alpha},   {"tau_cut", o.tau_cut},
                                {"update", o.update},       {"columns", columns}, {"eta", o.eta},
                                {"precision_bits", bits},   {"B1_upper", b1_hi},  {"rows", rows}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "Staleness-bias term vs tau_max  (" << o.objective << ", " << o.delays << " delays, T = " << o.steps
              << ", seed " << o.seed << ", eta " << o.eta << ", alpha " << o.alpha << ", tau_cut " << o.tau_cut << ", "
              << bits << "-bit MPFR)\n\n"
              << "The ideal update's bound on it, sum(sigma_t*tau_t)/T  (B1 <= " << b1_hi
              << " bounds every cgad entry; 1/(e*alpha) bounds adam-decay; the mean tau bounds ungated)\n";
    print_column_table(sweep, false, false);
    std::cout << "\nThe realized term R_T/(L*eta^2*G_run^2*T), R_T = sum_t L*|x_t - x_{t-tau_t}|*|x_{t+1} - x_t|, "
                 "G_run = max_t |u_t|\n  (x_{t+1} = x_t - eta*sigma_t*u_t for the ideal update, x_{t+1} = x_t - "
                 "eta*u_t for Adam; <= sum(sigma*tau)/T for the ideal update, <= mean tau for every update)\n";
    print_column_table(sweep, true, true);
  }
  if (!o.plot.empty()) plot_png(o.plot, bias_sweep_plot(o, sweep));
  for (std::size_t i = 0; i < sweep.columns.size(); ++i) {
    for (std::size_t row = 0; row < sweep.tau_maxes.size(); ++row) {
      fail_on_violation(sweep.reports[i][row],
                        sweep.columns[i].name + ", tau_max " + std::to_string(sweep.tau_maxes[row]));
    }
  }
}

void run_verify(const VerifyOptions& o) {
  const unsigned bits = apply_precision(o.precision);
  (void)trajectory_config(o);  // refuse bad input before anything runs
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
      "verify-bound",
      "Run the ideal gated update (or the real gated-moment Adam update) in MPFR, check the summed inequalities at "
      "every T and report the realized staleness-bias term");
  command->add_option("--objective", o->objective, theory::kObjectiveKindNames)->capture_default_str();
  command->add_option("--delays", o->delays, theory::kDelayKindNames)->capture_default_str();
  command->add_option("--tau-max", o->tau_max, "largest delay the schedule may produce")->capture_default_str();
  command->add_option("--steps", o->steps, "number of updates T")->capture_default_str();
  command->add_option("--seed", o->seed, "seed of objective data, x_0, delays and noise")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--update", o->update,
                   "ideal (the theorem's update, gate from --optimizer) or the real gated-moment Adam update: "
                   "cgad-adam|adam-decay-adam|adam")
      ->capture_default_str();
  CLI::Option* optimizer =
      command->add_option("--optimizer", o->optimizer, "the ideal update's gate: cgad|adam-decay|ungated")
          ->capture_default_str();
  command->add_option("--beta1", o->beta1, "Adam update: beta1 in [0,1)")->capture_default_str();
  command->add_option("--beta2", o->beta2, "Adam update: beta2 in [0,1)")->capture_default_str();
  command->add_option("--eps", o->eps, "Adam update: eps > 0")->capture_default_str();
  command->add_option("--on-zero-gate", o->on_zero_gate, "Adam update at sigma = 0: apply|skip")->capture_default_str();
  command->add_option("--alpha", o->alpha, "gate decay alpha >= 0")->capture_default_str();
  command->add_option("--tau-cut", o->tau_cut, "cosine cutoff tau_cut (integer >= 1)")->capture_default_str();
  command->add_option("--eta", o->eta, "step size eta > 0 (the Adam update's learning rate)")->capture_default_str();
  command->add_option("--dim", o->dimension, "dimension d of the objective")->capture_default_str();
  command->add_option("--noise", o->noise, "multiplicative gradient-noise level s in [0,1) (default: objective's)");
  command->add_flag("--json", o->json, "print JSON instead of a report");
  command->add_option("--plot", o->plot, "write a PNG figure (needs gnuplot)");
  command->add_flag("--sweep-tau-max", o->sweep,
                    "run tau_max = 1, 2, 4, ..., --tau-max for the ideal update's three gates (and, with an Adam "
                    "--update, the three Adam updates beside them); tables of the bias term");
  add_precision_option(*command, o->precision);
  command->callback([o, optimizer] {
    o->optimizer_given = optimizer->count() > 0;
    run_verify(*o);
  });
}

}  // namespace cgad::cli
