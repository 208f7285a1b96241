#pragma once
// What `cgad verify-bound` runs, shared with the report: the options of one trajectory (the ideal gated update
// or the real gated-moment Adam update), and the τ_max sweep of the staleness-bias term (theory/bias_sweep.hpp).
#include "plot.hpp"

#include "cgad/theory/bias_sweep.hpp"
#include "cgad/theory/trajectory.hpp"

#include <optional>
#include <string>
#include <vector>

namespace cgad::cli {

struct VerifyOptions {
  std::string objective = "geman-mcclure";
  std::string delays = "uniform";
  long tau_max = 16;
  long steps = 1000;
  std::uint64_t seed = 1;
  std::string update = "ideal";
  std::string optimizer = "cgad";  // the ideal update's gate
  bool optimizer_given = false;    // --optimizer was on the command line
  std::string alpha = "0.2";
  long tau_cut = 32;
  std::string eta = "0.05";
  std::string beta1 = "0.9", beta2 = "0.999", eps = "1e-8";  // the Adam update's
  std::string on_zero_gate = "apply";                        // the Adam update's: apply|skip
  std::size_t dimension = 8;
  std::optional<double> noise;
  bool json = false;
  std::string plot;
  bool sweep = false;
  unsigned precision = 0;
};

// The gate of the ideal update's `optimizer` (cgad, adam-decay or ungated); InputError for another name.
theory::UpdateGate update_gate(const std::string& optimizer, const VerifyOptions& o);
// The run `o` asks for (at o.tau_max): --update picks the update; for the Adam updates the gate is the one their
// name implies, and an explicit --optimizer that names another gate is refused (InputError).
theory::TrajectoryConfig trajectory_config(const VerifyOptions& o);
// The name of the run's update as update_name() spells it ("ideal cgad", "cgad-adam", …).
std::string run_name(const VerifyOptions& o);

// The sweep of `o` with a progress bar: the ideal update's three gates, and with a real --update the three real
// Adam updates beside them. Checks the input before the first run (InputError).
theory::BiasSweep run_bias_sweep(const VerifyOptions& o);
bool sweep_has_real_update(const VerifyOptions& o);
// The figure: the ideal update's Σσ_tτ_t/T per gate with B1 and 1/(eα) (ideal only), or the realized
// normalized bias term in two panels, the ideal update's gates with B1 and the real update's, each with the
// realized mean delay (with the real update); a gate is drawn alike in both.
PlotFigure bias_sweep_plot(const VerifyOptions& o, const theory::BiasSweep& sweep);

}  // namespace cgad::cli
