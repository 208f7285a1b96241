#pragma once
// The τ_max sweep of the staleness-bias term (theory/README.md §9): the same objective, seed and delay law at
// τ_max = 1, 2, 4, …, K, for the ideal update under the three gates and, when asked, for the three real
// gated-moment Adam updates beside them.
#include "cgad/theory/trajectory.hpp"

#include <functional>
#include <string>
#include <vector>

namespace cgad::theory {

struct SweepColumn {
  std::string name;  // update_name(update, gate)
  UpdateKind update;
  core::GateKind gate;
};

// Ideal only: ideal cgad, ideal adam-decay, ideal ungated. With the real update: those three, then cgad-adam,
// adam-decay-adam, adam.
std::vector<SweepColumn> sweep_columns(bool with_real_update);
// 1, 2, 4, …, below tau_max, then tau_max itself (just {0} for tau_max = 0).
std::vector<long> sweep_tau_maxes(long tau_max);

struct BiasSweep {
  std::vector<SweepColumn> columns;
  std::vector<long> tau_maxes;
  std::vector<std::vector<TrajectoryReport>> reports;  // [column][tau_max]
  reference::mpfr_real b1_upper;  // certified upper end of B1 for the sweep's α, τ_cut (at 257 bits)
};

// Runs every (column, τ_max) trajectory of `base` (whose gate supplies α and τ_cut; its kind and its update are
// replaced per column) at the current working precision. `alpha_text` is α as typed, for B1's enclosure.
// The input is checked before the first run (InputError). `on_progress` sees (runs done, runs in all).
BiasSweep run_bias_sweep(const TrajectoryConfig& base, const std::string& alpha_text, long tau_max,
                         bool with_real_update, const std::function<void(long, long)>& on_progress = {});

}  // namespace cgad::theory
