#pragma once
// What `cgad verify-bound` runs, shared with the report: the options of one ideal gated trajectory, and the
// τ_max sweep of the realized staleness-bias term Σσ_tτ_t/T for CGAD, Adam-Decay and the ungated update.
#include "plot.hpp"

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
  std::string optimizer = "cgad";
  std::string alpha = "0.2";
  long tau_cut = 32;
  std::string eta = "0.05";
  std::size_t dimension = 8;
  std::optional<double> noise;
  bool json = false;
  std::string plot;
  bool sweep = false;
  unsigned precision = 0;
};

inline constexpr const char* kSweepOptimizers[] = {"cgad", "adam-decay", "ungated"};

// The gate of `optimizer` (cgad, adam-decay or ungated); InputError for another name.
theory::UpdateGate update_gate(const std::string& optimizer, const VerifyOptions& o);
theory::TrajectoryConfig trajectory_config(const VerifyOptions& o, const std::string& optimizer, long tau_max);

struct BiasSweep {
  std::vector<long> tau_maxes;                              // 1, 2, 4, …, o.tau_max
  std::vector<std::vector<theory::TrajectoryReport>> reports;  // [optimizer in kSweepOptimizers][tau_max]
  reference::mpfr_real b1_upper;                            // certified upper end of B1 (256 bits)
};

// Runs every (optimizer, τ_max) trajectory at the current working precision, with a progress bar. Checks
// the input before the first run (InputError).
BiasSweep run_bias_sweep(const VerifyOptions& o);
// The figure: the bias term per optimizer against τ_max, with B1 and 1/(eα) as lines.
PlotSpec bias_sweep_plot(const VerifyOptions& o, const BiasSweep& sweep);

}  // namespace cgad::cli
