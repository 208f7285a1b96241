// Report sections: the convergence bound's constants with their certified verdicts, and the realized
// staleness-bias term against τ_max (theory/README.md states the theorem these numbers belong to).
#include "report_writer.hpp"
#include "theory_sweep.hpp"

#include "cgad/theory/constants.hpp"

#include <sstream>
#include <string>
#include <vector>

namespace cgad::cli {

std::string report_bound_section(ReportWriter& report) {
  const theory::BoundConstants c = theory::compute_bound_constants("0.2", 32);
  auto& md = report.markdown();
  md << "## 3. The convergence bound's constants, certified\n\n"
     << "For α = 0.2, τ_cut = 32 (`cgad bound`, " << c.precision_bits << "-bit MPFR/MPFI). Each row's verdict is "
     << "*proved* only when the upper end of the constant's enclosure lies below the lower end of the comparison's.\n\n"
     << "| inequality | constant (enclosure, 20 digits) | comparison | verdict |\n|---|---|---|---|\n";
  std::ostringstream csv;
  csv << "inequality,constant_lower,constant_upper,comparison_lower,comparison_upper,verdict\n";
  for (const auto& q : c.inequalities) {
    md << "| `" << q.statement << "` | [" << theory::decimal_down(q.constant.lower(), 20) << ", "
       << theory::decimal_up(q.constant.upper(), 20) << "] | [" << theory::decimal_down(q.comparison.lower(), 20) << ", "
       << theory::decimal_up(q.comparison.upper(), 20) << "] | " << theory::to_string(q.verdict) << " |\n";
    csv << '"' << q.statement << "\"," << theory::decimal_down(q.constant.lower(), 40) << ','
        << theory::decimal_up(q.constant.upper(), 40) << ',' << theory::decimal_down(q.comparison.lower(), 40) << ','
        << theory::decimal_up(q.comparison.upper(), 40) << ',' << theory::to_string(q.verdict) << '\n';
  }
  report.write_file("bound.csv", csv.str());
  md << "\nB1 is attained at τ* = " << reference::to_decimal(c.b1.argmax_mpfr, 12) << " (integer maximizer τ = "
     << c.b1.integer_argmax << "). Data: `bound.csv`.\n\n";
  std::size_t proved = 0;
  for (const auto& q : c.inequalities) proved += q.verdict == theory::Verdict::proved;
  return "bound: B1 = " + reference::to_decimal(c.b1.value_mpfr, 12) + ", B2 = " +
         reference::to_decimal(c.b2.value_mpfr, 12) + ", W = " + reference::to_decimal(c.w_mpfr, 12) + "; " +
         std::to_string(proved) + " of " + std::to_string(c.inequalities.size()) + " inequalities proved";
}

std::string report_bias_sweep_section(ReportWriter& report) {
  // A small sweep that finishes in seconds: 500 steps at 128 bits is ample to show the trend, which the
  // bound makes a statement about for every T.
  VerifyOptions o;
  o.objective = "sine-ripple";
  o.delays = "uniform";
  o.tau_max = 256;
  o.steps = 500;
  o.seed = 3;
  const unsigned bits = reference::working_precision_bits();
  reference::set_working_precision_bits(128);
  const BiasSweep sweep = run_bias_sweep(o);
  reference::set_working_precision_bits(bits);
  auto& md = report.markdown();
  md << "## 4. The staleness-bias term does not grow with the maximum delay\n\n"
     << "The ideal gated update in 128-bit MPFR on the `" << o.objective << "` objective, delays uniform on "
     << "[0, τ_max], T = " << o.steps << ", seed " << o.seed << " (`cgad verify-bound --objective " << o.objective
     << " --delays uniform --tau-max 256 --steps 500 --seed 3 --sweep-tau-max --precision 128`). "
     << "The realized Σσ_tτ_t/T:\n\n| τ_max | CGAD | Adam-Decay | ungated |\n|---:|---:|---:|---:|\n";
  std::ostringstream csv;
  csv << "tau_max,cgad,adam_decay,ungated\n";
  std::size_t violations = 0;
  std::vector<reference::mpfr_real> largest(std::size(kSweepOptimizers), reference::mpfr_real(0));
  for (std::size_t row = 0; row < sweep.tau_maxes.size(); ++row) {
    md << "| " << sweep.tau_maxes[row];
    csv << sweep.tau_maxes[row];
    for (std::size_t i = 0; i < std::size(kSweepOptimizers); ++i) {
      const theory::TrajectoryReport& r = sweep.reports[i][row];
      md << " | " << reference::to_decimal(r.bias, 6);
      csv << ',' << reference::to_decimal(r.bias, 20);
      largest[i] = r.bias > largest[i] ? r.bias : largest[i];
      violations += r.descent.first_violation || (!r.alignment_failure && r.design.first_violation) ? 1 : 0;
    }
    md << " |\n";
    csv << '\n';
  }
  report.write_file("bias_sweep.csv", csv.str());
  plot_png(report.dir() / "bias_sweep.png", bias_sweep_plot(o, sweep));
  md << "\nB1 ≤ " << theory::decimal_up(sweep.b1_upper, 12) << " bounds every CGAD entry. Runs in which a claimed "
     << "form of the summed inequality was violated: " << violations << " of "
     << sweep.tau_maxes.size() * std::size(kSweepOptimizers) << ".\n\n![bias sweep](bias_sweep.png)\n\n";
  std::string line = "bias sweep, tau_max 1.." + std::to_string(o.tau_max) + ": largest sum(sigma tau)/T";
  for (std::size_t i = 0; i < std::size(kSweepOptimizers); ++i) {
    line += std::string(i ? ", " : " ") + kSweepOptimizers[i] + " " + reference::to_decimal(largest[i], 4);
  }
  return line + " (B1 <= " + theory::decimal_up(sweep.b1_upper, 6) + "); " + std::to_string(violations) +
         " violations";
}

}  // namespace cgad::cli
