// Report section: the fast path against the MPFR reference over many steps, never re-synced — the rounding-noise
// study of `cgad noise` (noise_lockstep.hpp) at a size and length that take seconds, with its figures.
#include "noise_output.hpp"
#include "report_writer.hpp"

#include "cgad/differential/noise_lockstep.hpp"
#include "cgad/reference/real.hpp"

#include <algorithm>
#include <iomanip>
#include <map>

namespace cgad::cli {
namespace {

struct StudyScenario {
  const char* optimizer;
  fastpath::StateFormat state;
  fastpath::Rounding rounding;
  fastpath::Q8Semantics semantics;
  double scale_range;  // R: magnitudes log-uniform over [1/R, 1]
};

constexpr double kNarrow = 64, kWide = 1e5;
using fastpath::Q8Semantics;
using fastpath::Rounding;
using fastpath::StateFormat;

// Adam-Decay against CGAD (both zero-gate policies) with bf16 and q8 state under nearest rounding on a narrow
// stream — the bf16 accumulation — plus one stochastic-rounding run, the remedy it found for bf16; then q8 state
// on a wide stream, in both semantics — the v-zero trap.
constexpr StudyScenario kScenarios[] = {
    {"adam-decay", StateFormat::bf16, Rounding::nearest, Q8Semantics::cgad, kNarrow},
    {"cgad", StateFormat::bf16, Rounding::nearest, Q8Semantics::cgad, kNarrow},
    {"cgad-skip", StateFormat::bf16, Rounding::nearest, Q8Semantics::cgad, kNarrow},
    {"adam-decay", StateFormat::q8, Rounding::nearest, Q8Semantics::cgad, kNarrow},
    {"cgad", StateFormat::q8, Rounding::nearest, Q8Semantics::cgad, kNarrow},
    {"cgad-skip", StateFormat::q8, Rounding::nearest, Q8Semantics::cgad, kNarrow},
    {"cgad", StateFormat::bf16, Rounding::stochastic, Q8Semantics::cgad, kNarrow},
    {"adam-decay", StateFormat::q8, Rounding::nearest, Q8Semantics::bnb, kWide},
    {"cgad", StateFormat::q8, Rounding::nearest, Q8Semantics::bnb, kWide},
    {"cgad-skip", StateFormat::q8, Rounding::nearest, Q8Semantics::bnb, kWide},
    {"cgad", StateFormat::q8, Rounding::nearest, Q8Semantics::cgad, kWide},
    {"adam-decay", StateFormat::fp32, Rounding::nearest, Q8Semantics::cgad, kWide},
};

std::string sci(double x) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(3) << x;
  return s.str();
}

std::string fixed3(double x) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(3) << x;
  return s.str();
}

}  // namespace

std::string report_noise_section(ReportWriter& report) {
  // 128 bits: the reference's own error after 10^4 steps is ~2^-110 relative (cmd_noise.cpp), 2^100 below the
  // errors measured. 256 parameters × 10^4 steps: one q8 block's worth of elements per scale octave, long enough
  // for the linear growth of the bf16 bias to dominate its first-steps value; about 2 s per scenario here.
  std::vector<differential::NoiseRun> runs;
  const reference::PrecisionScope precision(128);
  for (const StudyScenario& s : kScenarios) {
    differential::NoiseScenario scenario;
    differential::parse_study_optimizer(s.optimizer, scenario);
    scenario.state = s.state;
    scenario.rounding = s.rounding;
    scenario.q8_semantics = s.semantics;
    scenario.min_q8_size = 0;  // 256 elements are one tensor: keep them in 8-bit state under bnb semantics too
    scenario.scale_range = s.scale_range;
    scenario.size = 256;
    scenario.steps = 10000;
    scenario.log_every = 100;
    validate(scenario);
    runs.push_back(differential::run_lockstep(scenario, [](long, long) {}));
  }

  auto& md = report.markdown();
  md << "## 5. Rounding noise: the fast path against the MPFR reference over 10^4 steps\n\n"
     << "Each fast-path configuration (bf16 parameters) and the 128-bit MPFR reference are fed the same synthetic "
     << "pseudo-gradient stream in lockstep and never re-synchronized, so the fast path's rounding errors accumulate "
     << "as they would in training (`cgad noise --optimizers adam-decay,cgad,cgad-skip --state bf16,q8 --size 256 "
     << "--steps 10000 --scale-range 64`, heavy-tailed delays: 7.5 % of events past τ_cut, seed 1; plus CGAD with "
     << "stochastic rounding; then `--state q8 --q8-semantics bnb,cgad --min-q8-size 0 --scale-range 1e5` and an fp32 "
     << "control). R64 / R1e+05 in a name: per-element magnitudes log-uniform over [1/R, 1]. v: relative error "
     << "(v_fast − v_ref)/v_ref; m: error in units of √v_ref; θ: drift in units of η; v0: share of stored v that "
     << "decodes to 0; >5η: share of element-steps with |Δθ| > 5η; max/η: the largest |Δθ|/η, fast path and "
     << "reference.\n\n"
     << "| scenario | v bias @10 % | v bias @end | v RMS @end | m RMS @end | θ RMS @end | v0 | >5η | max/η (ref) | σ = "
        "0 events |\n"
     << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::map<std::string, std::pair<double, double>> bias_range;  // "state/rounding" → min, max of the final v bias
  for (const differential::NoiseRun& run : runs) {
    const differential::NoiseSample& early = sample_at_fraction(run, 0.1);
    const differential::NoiseSample& end = run.samples.back();
    const differential::TrapSummary& t = end.trap;
    md << "| " << differential::scenario_name(run.scenario) << " | " << sci(early.v.bias) << " | " << sci(end.v.bias)
       << " | " << sci(end.v.rms) << " | " << sci(end.m.rms) << " | " << sci(end.theta.rms) << " | "
       << fixed3(t.v_zero_fraction) << " | " << sci(t.step_over_5lr_fraction) << " | " << sci(t.max_step_over_lr)
       << " (" << sci(t.reference_max_step_over_lr) << ") | " << end.gated_to_zero << " |\n";
    const std::string key = std::string(fastpath::to_string(run.scenario.state)) + " state, " +
                            std::string(fastpath::to_string(run.scenario.rounding)) + " rounding, R " +
                            sci(run.scenario.scale_range);
    auto [it, fresh] = bias_range.try_emplace(key, end.v.bias, end.v.bias);
    if (!fresh) it->second = {std::min(it->second.first, end.v.bias), std::max(it->second.second, end.v.bias)};
  }
  md << "\nFinal signed v bias by format (a bias that grows from the 10 % column to the end is accumulation, not "
     << "one-step error):\n\n";
  for (const auto& [key, range] : bias_range) {
    md << "- " << key << ": " << sci(range.first) << (range.first == range.second ? "" : " … " + sci(range.second))
       << "\n";
  }
  md << "\nThe README's "
     << "*Rounding noise* section states the study's findings over more seeds; `differential_noise_test` checks them "
     << "on every test run. Every sample: `noise.csv`.\n\n![v bias](noise_v_bias.png)\n\n![v RMS](noise_v_rms.png)\n\n";
  std::ostringstream csv;
  write_noise_samples_csv(csv, runs);
  report.write_file("noise.csv", csv.str());
  const NoisePlots plots = noise_plots(runs);
  plot_png(report.dir() / "noise_v_bias.png", plots.v_bias);
  plot_png(report.dir() / "noise_v_rms.png", plots.v_rms);
  std::string line = "rounding noise, v bias after 10^4 steps:";
  for (const auto& [key, range] : bias_range) {
    line += " " + key + " " + sci(range.first) + (range.first == range.second ? "" : ".." + sci(range.second)) + ";";
  }
  line.pop_back();
  return line;
}

}  // namespace cgad::cli
