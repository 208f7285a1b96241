// Report section: the staleness gate at the defaults α = 0.2, τ_cut = 32, with Adam-Decay's e^{−ατ} beside it.
#include "plot.hpp"
#include "report_writer.hpp"

#include "cgad/core/gate.hpp"
#include "cgad/reference/real.hpp"

#include <cmath>
#include <iomanip>

namespace cgad::cli {

std::string report_gate_section(ReportWriter& report) {
  using reference::mpfr_real;
  const mpfr_real alpha = core::parse_real<mpfr_real>("0.2", "alpha");
  const core::GateParams<mpfr_real> cgad{core::GateKind::cosine, alpha, mpfr_real(32)};
  const core::GateParams<mpfr_real> decay{core::GateKind::exponential, alpha, mpfr_real(32)};
  const unsigned bits = reference::working_precision_bits();
  const unsigned digits = static_cast<unsigned>(std::floor((bits - 8) * 0.30102999566398120));

  std::ostringstream csv;
  csv << "tau,gamma,sigma,adam_decay_sigma\n";
  auto& md = report.markdown();
  md << "## 1. The staleness gate\n\n"
     << "σ(τ) = γ(τ)·e^{−ατ} with γ(τ) = ½(1 + cos(πτ/τ_cut)) up to τ_cut and 0 past it; α = 0.2, τ_cut = 32, "
     << "evaluated in " << bits << "-bit MPFR (`cgad gate --json` prints " << digits
     << " significant digits; the table shows 12). Adam-Decay's factor e^{−ατ} never reaches 0.\n\n"
     << "| τ | γ(τ) | σ(τ) CGAD | e^{−ατ} Adam-Decay |\n|---:|---:|---:|---:|\n";
  for (int tau = 0; tau <= 34; ++tau) {
    const mpfr_real t(tau);
    const mpfr_real g = core::gamma(t, cgad), s = core::sigma(t, cgad), d = core::sigma(t, decay);
    csv << tau << ',' << core::to_decimal(g, digits) << ',' << core::to_decimal(s, digits) << ','
        << core::to_decimal(d, digits) << '\n';
    if (tau <= 4 || tau % 4 == 0 || tau >= 31) {
      md << "| " << tau << " | " << core::to_decimal(g, 12) << " | " << core::to_decimal(s, 12) << " | "
         << core::to_decimal(d, 12) << " |\n";
    }
  }
  report.write_file("gate.csv", csv.str());

  PlotSpec plot{
      "Staleness factor, alpha = 0.2, tau_cut = 32", "staleness tau (outer rounds)", "factor", false, true, {}};
  PlotSeries sigma_series{"CGAD sigma(tau)", {}, {}, false}, decay_series{"Adam-Decay exp(-alpha tau)", {}, {}, false};
  for (int quarter = 0; quarter <= 4 * 40; ++quarter) {
    const mpfr_real t = mpfr_real(quarter) / 4;
    const double s = core::sigma(t, cgad).convert_to<double>();
    if (s > 0) {
      sigma_series.x.push_back(t.convert_to<double>());
      sigma_series.y.push_back(s);
    }
    decay_series.x.push_back(t.convert_to<double>());
    decay_series.y.push_back(core::sigma(t, decay).convert_to<double>());
  }
  plot.series = {sigma_series, decay_series};
  plot_png(report.dir() / "gate.png", plot);
  md << "\nFull table: `gate.csv`. Figure (log scale; CGAD's curve ends where σ becomes exactly 0 at τ_cut):\n\n"
     << "![gate](gate.png)\n\n";
  return "gate: sigma(1) = " + core::to_decimal(core::sigma(mpfr_real(1), cgad), 6) +
         ", sigma(16) = " + core::to_decimal(core::sigma(mpfr_real(16), cgad), 6) +
         ", exactly 0 from tau_cut = 32 on (Adam-Decay's exp(-alpha tau) at 32: " +
         core::to_decimal(core::sigma(mpfr_real(32), decay), 6) + ")";
}

}  // namespace cgad::cli
