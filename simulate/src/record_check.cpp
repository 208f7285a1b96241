#include "record_check.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/sweep_json.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>

namespace cgad::simulate {
namespace {

using core::InputError;

// The engine's refusal of the record's spec, or none.
std::optional<std::string> engine_refusal(const SimulationSpec& spec) {
  try {
    validate(spec);
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// Both objectives' losses are ½·(squared distances), never negative (the NQM's minimum is 0 at its centres).
bool loss_possible(double loss) {
  return !(loss < 0);
}

void check_curve(const RunRecord& r, std::int64_t rounds_run) {
  const SimulationResult& s = r.result;
  if (s.curve.empty()) throw InputError("empty loss curve");
  if (s.curve.front().round != 0 || !(s.curve.front().loss == s.initial_loss)) {
    throw InputError("the curve does not start at round 0 with the initial loss");
  }
  if (s.curve.back().round != rounds_run) {
    throw InputError("the curve ends at round " + std::to_string(s.curve.back().round) + ", not at the " +
                     std::to_string(rounds_run) + " rounds it ran");
  }
  for (std::size_t i = 0; i < s.curve.size(); ++i) {
    const LossPoint& p = s.curve[i];
    if (i > 0 && p.round <= s.curve[i - 1].round) throw InputError("curve rounds not increasing");
    // Only a diverged run's last loss may be non-finite (its divergence is that loss).
    const bool last_of_diverged = r.status == RunStatus::diverged && i + 1 == s.curve.size();
    if (!loss_possible(p.loss) || (!std::isfinite(p.loss) && !last_of_diverged)) {
      throw InputError("impossible loss " + hexfloat(p.loss) + " at round " + std::to_string(p.round));
    }
  }
  const double last = s.curve.back().loss;
  if (!(s.final_loss == last || (std::isnan(s.final_loss) && std::isnan(last)))) {
    throw InputError("final_loss is not the curve's last loss");
  }
}

// The outcome: how many rounds it ran, and that its status, divergence and stall agree with its losses.
std::int64_t check_outcome(const RunRecord& r, const SimulationSpec& spec) {
  const SimulationResult& s = r.result;
  if (!std::isfinite(s.initial_loss) || !loss_possible(s.initial_loss)) {
    throw InputError("impossible initial_loss " + hexfloat(s.initial_loss));
  }
  const bool within_bound = std::isfinite(s.final_loss) && s.final_loss <= spec.divergence_factor * s.initial_loss;
  if (r.status == RunStatus::diverged) {
    if (s.divergence.empty()) throw InputError("diverged without a reason");
    if (s.diverged_at < 1 || s.diverged_at > spec.rounds ||
        (s.diverged_at % kDivergenceCheckEvery != 0 && s.diverged_at != spec.rounds)) {
      throw InputError("diverged_at " + std::to_string(s.diverged_at) + " is not a divergence check in [1, " +
                       std::to_string(spec.rounds) + "]");
    }
    if (within_bound) throw InputError("diverged with a final_loss within the divergence bound");
    return s.diverged_at;
  }
  if (!within_bound) {
    throw InputError(std::string(to_string(r.status)) + " with final_loss " + hexfloat(s.final_loss) +
                     ", not finite or above " + hexfloat(spec.divergence_factor) + " x the initial loss " +
                     hexfloat(s.initial_loss));
  }
  if (!s.divergence.empty() || s.diverged_at != -1) {
    throw InputError(std::string(to_string(r.status)) + " but with a divergence");
  }
  if (r.status == RunStatus::stalled && s.stalled.empty()) throw InputError("stalled without a reason");
  return spec.rounds;
}

void check_counts(const RunRecord& r, const SimulationSpec& spec, std::int64_t arrivals) {
  const SimulationResult& s = r.result;
  if (s.applied < 0 || s.skipped_nonfinite < 0 || s.skipped_zero_gate < 0 || s.skipped_overflowing < 0 ||
      s.inner_steps_skipped < 0) {
    throw InputError("negative counts");
  }
  // Each count is checked against the arrivals before they are added, so the sum cannot overflow.
  if (s.applied > arrivals || s.skipped_nonfinite > arrivals || s.skipped_zero_gate > arrivals ||
      s.skipped_overflowing > arrivals ||
      s.applied + s.skipped_nonfinite != arrivals - s.skipped_zero_gate - s.skipped_overflowing) {
    throw InputError("applied + skipped_nonfinite + skipped_zero_gate + skipped_overflowing is not the " +
                     std::to_string(arrivals) + " arrivals of the rounds it ran");
  }
  if (s.inner_steps_skipped > arrivals * spec.inner.steps) {
    throw InputError("more inner steps skipped than the " + std::to_string(arrivals * spec.inner.steps) + " it ran");
  }
  // A zero gate needs the cosine gate (CGAD, PA-CGAD), the skip policy, and for CGAD a τ that reaches τ_cut
  // (the key's τ is the fixed τ or τ_max); PA-CGAD's fragment ages can reach it at any τ.
  if (s.skipped_zero_gate > 0) {
    const core::OptimizerKind method = core::parse_optimizer(r.key.method);
    const bool gated = method == core::OptimizerKind::cgad || method == core::OptimizerKind::pa_cgad;
    const bool reachable = method == core::OptimizerKind::pa_cgad ||
                           static_cast<double>(r.key.tau) >= static_cast<double>(spec.outer.tau_cut);
    if (!gated || spec.outer.on_zero_gate != core::ZeroGatePolicy::skip || !reachable) {
      throw InputError("skipped_zero_gate " + std::to_string(s.skipped_zero_gate) + " where " + r.key.method +
                       " at tau " + std::to_string(r.key.tau) + " never skips at a zero gate");
    }
  }
  const bool stall = arrivals == 0 || s.inner_steps_skipped == arrivals * spec.inner.steps ||
                     s.skipped_nonfinite + s.skipped_overflowing == arrivals;
  if (r.status == RunStatus::finished && stall) throw InputError("finished, but it made no progress: that is stalled");
  if (r.status == RunStatus::stalled && !stall) throw InputError("stalled, but its counts show progress");
}

// Per-tensor trap metrics: one per tensor of the objective, in its order and with its names and sizes, each a
// possible value; the whole-run largest step is the largest of the tensors'.
void check_tensor_traps(const SimulationResult& s, const SimulationSpec& spec, bool trap) {
  if (!trap) {
    if (!s.tensor_traps.empty()) throw InputError("tensor_traps present outside the Adam family");
    return;
  }
  const std::vector<std::size_t> sizes = tensor_sizes(spec.objective, spec.size, spec.depth);
  const std::vector<std::string> names = tensor_names(spec.objective, spec.size, spec.depth);
  if (s.tensor_traps.size() != sizes.size()) {
    throw InputError("tensor_traps has " + std::to_string(s.tensor_traps.size()) + " entries for " +
                     std::to_string(sizes.size()) + " tensors");
  }
  double largest = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const TensorTrap& t = s.tensor_traps[k];
    if (t.name != names[k] || t.size != sizes[k]) {
      throw InputError("tensor_traps entry " + std::to_string(k) + " is '" + t.name + "' of " + std::to_string(t.size) +
                       ", the objective's is '" + names[k] + "' of " + std::to_string(sizes[k]));
    }
    for (const double fraction :
         {t.counts.v_zero_fraction, t.counts.m_zero_fraction, t.counts.step_over_5lr_fraction}) {
      if (!(fraction >= 0 && fraction <= 1))
        throw InputError("tensor " + t.name + ": a fraction " + hexfloat(fraction) + " is impossible");
    }
    if (!(t.counts.max_step_over_lr >= 0 && std::isfinite(t.counts.max_step_over_lr))) {
      throw InputError("tensor " + t.name + ": max_step_over_lr " + hexfloat(t.counts.max_step_over_lr) +
                       " is impossible");
    }
    largest = std::max(largest, t.counts.max_step_over_lr);
  }
  if (s.max_step_over_lr && *s.max_step_over_lr != largest) {
    throw InputError("max_step_over_lr " + hexfloat(*s.max_step_over_lr) + " is not the largest of its tensors' (" +
                     hexfloat(largest) + ")");
  }
}

void check_staleness_and_trap(const RunRecord& r, const SimulationSpec& spec, std::int64_t arrivals) {
  const SimulationResult& s = r.result;
  const double tau = static_cast<double>(r.key.tau);
  if (!(s.mean_tau >= 0 && s.mean_tau <= tau) ||
      (spec.delays == theory::DelayKind::constant_from_start && arrivals > 0 && s.mean_tau != tau)) {
    throw InputError("mean_tau " + hexfloat(s.mean_tau) + " is impossible at tau " + std::to_string(r.key.tau));
  }
  const bool pa = spec.outer.optimizer == core::OptimizerKind::pa_cgad && !spec.delayed_nesterov;
  if (!std::isfinite(s.mean_tau_effective) ||
      (pa ? s.mean_tau_effective < s.mean_tau : s.mean_tau_effective != s.mean_tau)) {
    throw InputError("mean_tau_effective " + hexfloat(s.mean_tau_effective) + " is impossible beside mean_tau " +
                     hexfloat(s.mean_tau));
  }
  const bool trap = !spec.delayed_nesterov && core::is_adam_family(spec.outer.optimizer);
  for (const auto& [name, value, fraction] : {std::tuple{"v_zero_fraction", s.v_zero_fraction, true},
                                              std::tuple{"step_over_5lr_fraction", s.step_over_5lr_fraction, true},
                                              std::tuple{"max_step_over_lr", s.max_step_over_lr, false},
                                              std::tuple{"m_zero_fraction", s.m_zero_fraction, true}}) {
    if (value.has_value() != trap) {
      throw InputError(std::string(name) + (trap ? " missing for " : " present for ") + r.key.method);
    }
    if (value && !(*value >= 0 && std::isfinite(*value) && (!fraction || *value <= 1))) {
      throw InputError(std::string(name) + " " + hexfloat(*value) + " is impossible");
    }
  }
  check_tensor_traps(s, spec, trap);
}

}  // namespace

void check_record(const RunRecord& r, const SweepGrid& grid) {
  const SimulationSpec spec = run_spec(grid, r.key);
  const std::optional<std::string> refusal = engine_refusal(spec);
  if (r.status == RunStatus::unsupported) {
    if (!refusal) throw InputError("unsupported, but the engine runs it");
    if (r.unsupported_reason != *refusal) throw InputError("unsupported for a reason that is not the engine's");
    return;
  }
  if (refusal) throw InputError("the engine refuses it (" + *refusal + ")");
  const std::int64_t rounds_run = check_outcome(r, spec);
  check_curve(r, rounds_run);
  const std::int64_t arrivals = arrival_rounds(spec.delays, spec.tau, rounds_run);
  check_counts(r, spec, arrivals);
  check_staleness_and_trap(r, spec, arrivals);
}

}  // namespace cgad::simulate
