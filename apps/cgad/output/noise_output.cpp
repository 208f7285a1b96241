#include "noise_output.hpp"

#include <sstream>

namespace cgad::cli {

const differential::NoiseSample& sample_at_fraction(const differential::NoiseRun& run, double fraction) {
  const auto target = static_cast<std::int64_t>(fraction * static_cast<double>(run.samples.back().step));
  for (const auto& s : run.samples) {
    if (s.step >= target) return s;
  }
  return run.samples.back();
}

void write_noise_samples_csv(std::ostream& csv, const std::vector<differential::NoiseRun>& runs) {
  const std::streamsize precision = csv.precision();
  csv << "scenario,step,v_mean_abs,v_rms,v_max_abs,v_bias,m_mean_abs,m_rms,m_max_abs,m_bias,theta_mean_abs,"
         "theta_rms,theta_max_abs,theta_bias,v_zero_fraction,m_zero_fraction,step_over_5lr_fraction,"
         "max_step_over_lr,reference_max_step_over_lr,gated_to_zero\n";
  csv.precision(17);
  const auto row = [&csv](const std::string& scenario, std::int64_t step, const differential::ErrorSummary*(&errors)[3],
                          const differential::TrapSummary& t, std::int64_t gated_to_zero) {
    csv << scenario << ',' << step;
    for (const differential::ErrorSummary* e : errors) {
      csv << ',' << e->mean_abs << ',' << e->rms << ',' << e->max_abs << ',' << e->bias;
    }
    csv << ',' << t.v_zero_fraction << ',' << t.m_zero_fraction << ',' << t.step_over_5lr_fraction << ','
        << t.max_step_over_lr << ',' << t.reference_max_step_over_lr << ',' << gated_to_zero << '\n';
  };
  for (const auto& run : runs) {
    const std::string name = differential::scenario_name(run.scenario);
    for (const auto& s : run.samples) {
      const differential::ErrorSummary* errors[3] = {&s.v, &s.m, &s.theta};
      row(name, s.step, errors, s.trap, s.gated_to_zero);
    }
    if (run.tensors.size() < 2) continue;
    // A layout of several tensors: each tensor's rows follow, as the scenario "<name>/tensor<k>".
    for (std::size_t k = 0; k < run.tensors.size(); ++k) {
      for (const auto& s : run.samples) {
        const differential::TensorSample& p = s.tensors[k];
        const differential::ErrorSummary* errors[3] = {&p.v, &p.m, &p.theta};
        row(name + "/tensor" + std::to_string(k), s.step, errors, p.trap, s.gated_to_zero);
      }
    }
  }
  csv.precision(precision);
}

NoisePlots noise_plots(const std::vector<differential::NoiseRun>& runs) {
  NoisePlots plots{
      {"Relative RMS error of v (fast path vs MPFR), never re-synced",
       "outer step",
       "RMS (v_fast - v_ref)/v_ref",
       false,
       true,
       {}},
      {"Signed mean relative error of v (bias)", "outer step", "mean (v_fast - v_ref)/v_ref", false, false, {}}};
  for (const auto& run : runs) {
    PlotSeries rms{differential::scenario_name(run.scenario), {}, {}, false}, bias = rms;
    for (const auto& s : run.samples) {
      rms.x.push_back(static_cast<double>(s.step));
      rms.y.push_back(s.v.rms);
      bias.x.push_back(static_cast<double>(s.step));
      bias.y.push_back(s.v.bias);
    }
    plots.v_rms.series.push_back(std::move(rms));
    plots.v_bias.series.push_back(std::move(bias));
  }
  return plots;
}

}  // namespace cgad::cli
