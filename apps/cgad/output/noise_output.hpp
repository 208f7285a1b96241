#pragma once
// What `cgad noise` and the report's rounding-noise section both make of lockstep runs: the per-sample CSV and
// the two figures of v's error over the run. One definition, so the report shows exactly what the command does.
#include "plot.hpp"

#include "cgad/differential/noise_lockstep.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace cgad::cli {

// The first logged sample at or past `fraction` of the run (the last one if none is).
const differential::NoiseSample& sample_at_fraction(const differential::NoiseRun& run, double fraction);

// One row per logged sample of every run: scenario, step, mean_abs/rms/max_abs/bias of v, m and θ, the trap
// metrics, gated_to_zero; for a run over several tensors, then each tensor's rows as scenario "<name>/tensor<k>".
// Written to `out` row by row, so that no copy of the whole table is held.
void write_noise_samples_csv(std::ostream& out, const std::vector<differential::NoiseRun>& runs);

// One panel per configuration the runs differ in besides the optimizer (state format and semantics, rounding,
// stream, seed ...), titled in words, with one series per optimizer styled alike in every panel; what every run
// shares is said once, in the figure's title.
struct NoisePlots {
  PlotFigure v_rms;   // relative RMS error of v over the run (log y)
  PlotFigure v_bias;  // signed mean relative error of v over the run
};
NoisePlots noise_plots(const std::vector<differential::NoiseRun>& runs);

}  // namespace cgad::cli
