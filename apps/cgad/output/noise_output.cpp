#include "noise_output.hpp"

#include "optimizer_words.hpp"

#include <algorithm>
#include <cstdio>
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

namespace {

// A series of a panel: the optimizer, and its zero-gate policy where it is not the default.
std::string series_words(const differential::NoiseScenario& s) {
  const std::string name = optimizer_words(s.optimizer);
  return s.on_zero_gate == core::ZeroGatePolicy::skip ? name + ", " + zero_gate_words(s.on_zero_gate) : name;
}

std::string number(const char* format, double x) {
  char text[64];
  std::snprintf(text, sizeof text, format, x);
  return text;
}

// Everything but the optimizer that tells runs apart (scenario_name's fields), each in words.
std::vector<std::string> configuration_words(const differential::NoiseScenario& s) {
  using fastpath::Q8Semantics;
  using fastpath::StateFormat;
  std::string state = s.state == StateFormat::q8 ? "8-bit state" : std::string(fastpath::to_string(s.state)) + " state";
  std::vector<std::string> notes;
  if (s.state == StateFormat::q8 || s.q8_semantics == Q8Semantics::bnb) {
    notes.push_back(s.q8_semantics == Q8Semantics::bnb ? "bitsandbytes semantics" : "cgad semantics");
  }
  if (s.v_map != fastpath::VMap::dynamic) notes.push_back(std::string(fastpath::to_string(s.v_map)) + " v map");
  for (std::size_t i = 0; i < notes.size(); ++i) state += (i ? ", " : " (") + notes[i];
  if (!notes.empty()) state += ")";
  std::vector<std::string> words{std::string(fastpath::to_string(s.params)) + " parameters", state,
                                 std::string(fastpath::to_string(s.rounding)) + " rounding"};
  if (s.stream) {
    words.push_back("recorded stream " + s.stream_name);
  } else {
    words.push_back(s.delays == "heavy" ? "heavy-tailed delays" : s.delays + " delays");
    words.push_back(number("magnitudes over [1/R, 1], R = %g", s.scale_range));
    words.push_back(s.zero_fraction > 0 ? number("a share %g of zeros", s.zero_fraction) : "no zeros");
    words.push_back(std::to_string(s.size) + " elements");
  }
  words.push_back("seed " + std::to_string(s.seed));
  return words;
}

// The parts joined by commas, a line break before a part that would take a line past `width` characters (a
// panel's title is half the figure wide).
std::string joined(const std::vector<std::string>& parts, std::size_t width) {
  std::string out;
  std::size_t line = 0;  // characters on the current line
  for (const auto& part : parts) {
    if (!out.empty()) {
      const bool wrap = line + 2 + part.size() > width;
      out += wrap ? ",\n" : ", ";
      line = wrap ? 0 : line + 2;
    }
    out += part;
    line += part.size();
  }
  return out;
}

}  // namespace

NoisePlots noise_plots(const std::vector<differential::NoiseRun>& runs) {
  // The words every run shares go into the figure's title, the rest into its panel's.
  std::vector<std::vector<std::string>> words;
  for (const auto& run : runs) words.push_back(configuration_words(run.scenario));
  std::vector<std::string> shared;
  for (const std::string& w : words.empty() ? std::vector<std::string>{} : words.front()) {
    if (std::all_of(words.begin(), words.end(),
                    [&](const auto& ws) { return std::find(ws.begin(), ws.end(), w) != ws.end(); })) {
      shared.push_back(w);
    }
  }
  const std::string common = shared.empty() ? "" : "\n" + joined(shared, 140);
  NoisePlots plots{{"Relative RMS error of v, fast path vs MPFR, never re-synced" + common, {}},
                   {"Signed mean relative error of v (bias), fast path vs MPFR" + common, {}}};
  std::vector<std::string> panel_keys, optimizers;  // in order of first appearance
  for (std::size_t r = 0; r < runs.size(); ++r) {
    std::vector<std::string> own;
    for (const std::string& w : words[r]) {
      if (std::find(shared.begin(), shared.end(), w) == shared.end()) own.push_back(w);
    }
    const std::string key = joined(own, 60);
    const auto panel =
        static_cast<std::size_t>(std::find(panel_keys.begin(), panel_keys.end(), key) - panel_keys.begin());
    if (panel == panel_keys.size()) {
      panel_keys.push_back(key);
      plots.v_rms.panels.push_back({key, "outer step", "RMS (v_fast - v_ref)/v_ref", false, true, {}});
      plots.v_bias.panels.push_back({key, "outer step", "mean (v_fast - v_ref)/v_ref", false, false, {}});
    }
    const std::string optimizer = series_words(runs[r].scenario);
    const auto style = std::find(optimizers.begin(), optimizers.end(), optimizer) - optimizers.begin();
    if (static_cast<std::size_t>(style) == optimizers.size()) optimizers.push_back(optimizer);
    PlotSeries rms{optimizer, {}, {}, true, static_cast<int>(style)}, bias = rms;
    for (const auto& s : runs[r].samples) {
      rms.x.push_back(static_cast<double>(s.step));
      rms.y.push_back(s.v.rms);
      bias.x.push_back(static_cast<double>(s.step));
      bias.y.push_back(s.v.bias);
    }
    plots.v_rms.panels[panel].series.push_back(std::move(rms));
    plots.v_bias.panels[panel].series.push_back(std::move(bias));
  }
  if (panel_keys.size() == 1) {  // one panel: the figure's title is its own
    plots.v_rms.panels.front().title = plots.v_rms.title;
    plots.v_bias.panels.front().title = plots.v_bias.title;
  }
  return plots;
}

}  // namespace cgad::cli
