#include "cgad/simulate/simulation.hpp"

#include "fragment_progress.hpp"
#include "outer_step.hpp"

#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/fragments.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/simulate/lr_scale.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/worker.hpp"
#include "cgad/theory/trajectory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <type_traits>

namespace cgad::simulate {
namespace {

using core::InputError;

// Limits that keep one run's memory and time bounded (the CLI runs many of them side by side).
constexpr std::size_t kMaxNqmDimension = std::size_t{1} << 24;
constexpr std::size_t kMaxHiddenWidth = 4096;
constexpr std::size_t kMaxDepth = 16;
constexpr double kMaxOutlierScale = 1e6;  // x·R stays far inside float for any normal draw (|z| < 40)
constexpr std::size_t kMaxWorkers = 4096;
constexpr std::int64_t kMaxRounds = 100'000'000;
constexpr std::int64_t kMaxInnerSteps = 1'000'000;
constexpr long kMaxTau = 1'000'000;
constexpr double kMaxStateBytes = 1024.0 * 1024.0 * 1024.0;  // every per-parameter buffer of a run

std::string shown(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

void require_count(std::int64_t value, std::int64_t limit, const std::string& name) {
  if (value < 1 || value > limit) {
    throw InputError(name + " must lie in [1, " + std::to_string(limit) + "], got " + std::to_string(value));
  }
}

void require_nonnegative(double value, const std::string& name) {
  if (!std::isfinite(value) || value < 0) throw InputError(name + " must be finite and >= 0, got " + shown(value));
}

// The inner AdamW's hyperparameters obey the same rules as the outer Adam's (the reference's validation),
// reported as the inner optimizer's; and its lr is > 0, where the optimizers take 0: workers at lr 0 send Δ = 0,
// a run that measures nothing.
void validate_inner(const InnerConfig& inner) {
  require_count(inner.steps, kMaxInnerSteps, "inner steps H");
  try {
    if (inner.kind == InnerOptimizerKind::adamw) {
      core::validate(core::AdamHyper<float>{inner.lr, inner.beta1, inner.beta2, inner.eps, inner.weight_decay});
    }
    core::require_positive(inner.lr, "lr");
  } catch (const InputError& e) {
    throw InputError(std::string("inner ") + e.what());
  }
}

void validate_outer(const SimulationSpec& spec, std::size_t parameters) {
  if (runs_delayed_nesterov(spec)) {
    if (spec.outer.params != fastpath::ParamFormat::fp32 || spec.outer.state != fastpath::StateFormat::fp32) {
      throw InputError(
          "delayed-nesterov runs the reference optimizer in float: it needs fp32 params and fp32 state, got " +
          std::string(fastpath::to_string(spec.outer.params)) + " params and " +
          std::string(fastpath::to_string(spec.outer.state)) + " state");
    }
    if (spec.outer.fragments != 1) {
      throw InputError("only pa-cgad takes fragments; delayed-nesterov got " + std::to_string(spec.outer.fragments));
    }
    if (spec.outer.q8_semantics == fastpath::Q8Semantics::bnb) {
      // fastpath::validate's refusal of bnb for a method that is not Adam, for the one it never sees.
      throw InputError("q8 semantics bnb is bitsandbytes' Adam; delayed-nesterov keeps cgad's");
    }
    core::validate(spec.outer.nesterov);
    if (spec.delayed_nesterov_buffer < 1) {
      throw InputError("delayed-nesterov buffer N must be >= 1, got " + std::to_string(spec.delayed_nesterov_buffer));
    }
    return;
  }
  fastpath::validate(spec.outer);
  // The optimizers take lr = 0; a run does not: its trap metrics measure each step in units of the outer lr.
  core::require_positive(core::is_adam_family(spec.outer.optimizer) ? spec.outer.adam.lr : spec.outer.nesterov.lr,
                         "outer lr");
  if (spec.outer.fragments > parameters) {
    throw InputError("empty fragment: " + std::to_string(spec.outer.fragments) + " fragments over " +
                     std::to_string(parameters) + " parameters");
  }
}

// Depth and input features belong to the teacher-student's network; the NQM has neither.
void validate_objective_shape(const SimulationSpec& spec) {
  const bool mlp = spec.objective == ObjectiveKind::teacher_student;
  if (spec.depth < 1 || spec.depth > kMaxDepth) {
    throw InputError("depth must lie in [1, " + std::to_string(kMaxDepth) + "], got " + std::to_string(spec.depth));
  }
  if (!mlp && spec.depth != 1) throw InputError("depth applies to the teacher-student objective, not nqm");
  if (spec.outlier_features > kTeacherShape.inputs) {
    throw InputError("outlier features must lie in [0, " + std::to_string(kTeacherShape.inputs) +
                     "] (the inputs' "
                     "dimensions), got " +
                     std::to_string(spec.outlier_features));
  }
  if (!(spec.outlier_scale > 0) || spec.outlier_scale > kMaxOutlierScale) {
    throw InputError("outlier scale must lie in (0, 1e6], got " + shown(spec.outlier_scale));
  }
  if (!mlp && (spec.outlier_features != 0 || spec.outlier_scale != 1.0)) {
    throw InputError("outlier features apply to the teacher-student objective's inputs, not nqm");
  }
}

float widen(float x) {
  return x;
}
float widen(fastpath::bf16 x) {
  return fastpath::to_float(x);
}

template <class Param>
Param narrow(float x) {
  if constexpr (std::is_same_v<Param, float>) {
    return x;
  } else {
    return fastpath::round_nearest_even_bf16(x);
  }
}

// The snapshot ring's length: θ_r is read by round r + τ_r ≤ r + min(τ_max, rounds − 1), so
// min(τ_max, rounds) + 1 slots suffice (theory/src/trajectory.cpp sizes its ring the same way).
std::size_t ring_slots(const SimulationSpec& spec) {
  return static_cast<std::size_t>(std::min<std::int64_t>(spec.tau, spec.rounds)) + 1;
}

// The share of the parameters whose tensors keep fp32 state in a q8 configuration (under min_q8_size).
double q8_fallback_share(const SimulationSpec& spec) {
  const std::size_t min_q8 = fastpath::effective_min_q8_size(spec.outer);
  double total = 0, fallback = 0;
  for (const std::size_t size : tensor_sizes(spec.objective, spec.size, spec.depth)) {
    total += static_cast<double>(size);
    if (size < min_q8) fallback += static_cast<double>(size);
  }
  return total > 0 ? fallback / total : 0.0;
}

// The bytes a run holds per parameter, every per-parameter buffer counted: θ and the ring in the parameters'
// format; the outer optimizer's state in its format (Adam family: m and v; Nesterov and SDM: one momentum;
// Delayed Nesterov: two float buffers); each worker's inner AdamW m and v; the run's float vectors (the
// widened snapshot, Δ, widened θ, the shared gradient scratch, a job's start and local parameters, the initial
// point, the result's final parameters, and the trap counter's θ before a step and its widened θ); the workers'
// kept copies (PA-CGAD keeping fragment progress, fragment_progress.hpp); and the objective's own.
double bytes_per_parameter(const SimulationSpec& spec) {
  const double param_bytes = spec.outer.params == fastpath::ParamFormat::bf16 ? 2.0 : 4.0;
  double outer_state = 0;
  if (runs_delayed_nesterov(spec)) {
    outer_state = 2 * 4.0;
  } else {
    const double moments = core::is_adam_family(spec.outer.optimizer) ? 2.0 : 1.0;
    // q8: a code for every parameter, an absmax per block, and fp32 moments for the tensors under min_q8_size
    // (as fastpath::HostState allocates them).
    const double moment_bytes = spec.outer.state == fastpath::StateFormat::fp32 ? 4.0
                                : spec.outer.state == fastpath::StateFormat::bf16
                                    ? 2.0
                                    : 1.0 + 4.0 / 256.0 + 4.0 * q8_fallback_share(spec);
    outer_state = moments * moment_bytes;
  }
  const double inner_state = spec.inner.kind == InnerOptimizerKind::adamw ? 2 * 4.0 : 0.0;
  constexpr double kRunFloats = 10;
  const std::size_t fragments = runs_delayed_nesterov(spec) ? 1 : spec.outer.fragments;
  return static_cast<double>(ring_slots(spec) + 1) * param_bytes + outer_state +
         static_cast<double>(spec.workers) * inner_state + kRunFloats * 4.0 +
         JobCopies::bytes_per_parameter(spec.fragment_progress, spec.workers, fragments) +
         objective_bytes_per_parameter(spec.objective);
}

// The bytes of the loss curve a run records: round 0, every log_every-th round, the last and a divergence round.
double curve_bytes(const SimulationSpec& spec) {
  return (static_cast<double>(spec.rounds / spec.log_every) + 3.0) * static_cast<double>(sizeof(LossPoint));
}

// For the adversarial schedule: argmax τ·σ(τ) under the CGAD gate of the spec's α and τ_cut, whatever the
// optimizer, so that every method of a comparison faces the same delays.
long adversarial_tau(const SimulationSpec& spec) {
  if (spec.delays != theory::DelayKind::adversarial) return 0;
  fastpath::StepConfig cgad = spec.outer;
  cgad.optimizer = core::OptimizerKind::cgad;
  return theory::integer_argmax_tau_sigma(fastpath::gate_params<reference::mpfr_real>(cgad), spec.tau);
}

// Why a run that reached its last round made no progress a finished run could be judged by, or "": nothing arrived
// (constant delays deliver nothing in the first τ rounds, and the run was no longer), every inner step was refused
// (the workers never moved: Δ = 0), or every arrival was refused as non-finite or overflowing (the server never
// moved).
std::string stall_reason(const SimulationResult& result, std::int64_t arrivals, std::int64_t inner_steps) {
  if (arrivals == 0) return "nothing arrived: constant delays deliver nothing in the first tau rounds";
  if (result.inner_steps_skipped == arrivals * inner_steps) {
    return "every inner step (" + std::to_string(result.inner_steps_skipped) +
           ") was refused for a non-finite or overflowing gradient";
  }
  if (result.skipped_nonfinite + result.skipped_overflowing == arrivals) {
    return "every arrival (" + std::to_string(arrivals) + ") was refused as non-finite or overflowing";
  }
  return "";
}

template <class Param>
SimulationResult run(const SimulationSpec& spec, const std::function<void(std::int64_t, std::int64_t)>& progress,
                     ArrivalRecorder* recorder) {
  const std::unique_ptr<Objective> objective = make_objective(spec);
  const std::size_t n = objective->parameters();
  const std::vector<std::size_t> tensors = objective->tensor_sizes();
  const std::vector<float> multipliers = lr_multipliers(spec.objective, spec.size, spec.lr_scale, spec.depth);
  const core::FragmentLayout layout(n, runs_delayed_nesterov(spec) ? 1 : spec.outer.fragments);
  const WorkerRounding worker_round{spec.worker_params == WorkerParams::bf16};

  std::vector<Param> theta;
  for (float x : objective->initial_point(spec.seed)) theta.push_back(narrow<Param>(x));
  // ring[r mod slots] holds θ_r, the parameters at the start of round r, until the last round that can read it.
  const std::int64_t slots = static_cast<std::int64_t>(ring_slots(spec));
  std::vector<std::vector<Param>> ring(static_cast<std::size_t>(slots));
  std::vector<Worker> workers;
  for (std::size_t k = 0; k < spec.workers; ++k) {
    workers.emplace_back(spec.inner, tensors, multipliers, worker_round, spec.seed, static_cast<std::uint32_t>(k));
  }
  OuterStep outer(spec, tensors, multipliers);
  JobCopies jobs(spec.fragment_progress, spec.workers, layout, worker_round);
  theory::DelaySchedule delays(spec.delays, spec.tau, spec.seed, adversarial_tau(spec));
  // The constant schedule's pipeline fills for τ rounds before the first arrival (simulation.hpp).
  const std::int64_t idle = spec.delays == theory::DelayKind::constant_from_start ? spec.tau : 0;

  std::vector<float> snapshot(n), delta(n), widened(n), grad(n);
  if (recorder != nullptr) {
    for (std::size_t i = 0; i < n; ++i) widened[i] = widen(theta[i]);
    recorder->start(widened, tensors);
  }
  const auto loss_now = [&] {
    for (std::size_t i = 0; i < n; ++i) widened[i] = widen(theta[i]);
    return objective->loss(widened);
  };

  SimulationResult result;
  result.initial_loss = loss_now();
  result.final_loss = result.initial_loss;
  result.curve.push_back({0, result.initial_loss});
  double tau_sum = 0, tau_effective_sum = 0;
  std::int64_t rounds_run = 0, arrivals = 0;
  for (std::int64_t r = 0; r < spec.rounds; ++r) {
    ring[static_cast<std::size_t>(r % slots)] = theta;
    rounds_run = r + 1;
    if (r >= idle) {
      const std::int64_t tau = std::min<std::int64_t>(delays.next(), r);
      const std::vector<Param>& old = ring[static_cast<std::size_t>((r - tau) % slots)];
      for (std::size_t i = 0; i < n; ++i) snapshot[i] = widen(old[i]);
      const std::size_t k = static_cast<std::size_t>(r % static_cast<std::int64_t>(spec.workers));
      const std::span<float> local = jobs.begin(k, snapshot);
      result.inner_steps_skipped += workers[k].run(*objective, local, grad);

      const std::size_t fragment = jobs.fragment(r);
      const std::span<float> slice(delta.data() + layout.offset(fragment), layout.size(fragment));
      jobs.end(k, fragment, slice);
      if (recorder != nullptr) recorder->arrival(slice, tau, fragment);
      const fastpath::StepReport report = outer.step(std::span<Param>(theta), slice, tau, fragment);
      outer.advance_round();
      if (report.applied) {
        ++result.applied;
      } else if (report.reason == core::SkipReason::nonfinite_gradient) {
        ++result.skipped_nonfinite;
      } else if (report.reason == core::SkipReason::overflowing_gradient) {
        ++result.skipped_overflowing;
      } else {
        ++result.skipped_zero_gate;
      }
      tau_sum += static_cast<double>(tau);
      tau_effective_sum += static_cast<double>(report.tau_effective);
      ++arrivals;
    }

    // The loss is evaluated on the union of the logged rounds and the divergence checks; only the checks,
    // whose cadence does not depend on log_every, can end the run.
    const bool last = rounds_run == spec.rounds;
    const bool logged = last || rounds_run % spec.log_every == 0;
    const bool checked = last || rounds_run % kDivergenceCheckEvery == 0;
    if (!logged && !checked) continue;
    const double loss = loss_now();
    result.final_loss = loss;
    const bool finite = std::isfinite(loss);
    const bool diverged = checked && (!finite || loss > spec.divergence_factor * result.initial_loss);
    if (logged || diverged) result.curve.push_back({rounds_run, loss});
    if (logged && progress) progress(rounds_run, spec.rounds);
    if (diverged) {
      result.diverged = true;
      result.diverged_at = rounds_run;
      result.divergence = finite ? "loss " + shown(loss) + " > " + shown(spec.divergence_factor) + " x initial " +
                                       shown(result.initial_loss)
                                 : "non-finite loss";
      break;
    }
  }
  result.mean_tau = arrivals > 0 ? tau_sum / static_cast<double>(arrivals) : 0.0;
  result.mean_tau_effective = arrivals > 0 ? tau_effective_sum / static_cast<double>(arrivals) : 0.0;
  if (!result.diverged) result.stalled = stall_reason(result, arrivals, spec.inner.steps);
  if (const std::optional<OuterStep::TrapReport> trap = outer.trap()) {
    result.v_zero_fraction = trap->all.v_zero_fraction;
    result.m_zero_fraction = trap->all.m_zero_fraction;
    result.step_over_5lr_fraction = trap->all.step_over_5lr_fraction;
    result.max_step_over_lr = trap->all.max_step_over_lr;
    const std::vector<std::string> names = tensor_names(spec.objective, spec.size, spec.depth);
    for (std::size_t k = 0; k < tensors.size(); ++k)
      result.tensor_traps.push_back({names[k], tensors[k], trap->tensors[k]});
  }
  result.final_params.resize(n);
  for (std::size_t i = 0; i < n; ++i) result.final_params[i] = widen(theta[i]);
  return result;
}

}  // namespace

ObjectiveKind parse_objective_kind(std::string_view name) {
  if (name == "nqm") return ObjectiveKind::nqm;
  if (name == "teacher-student") return ObjectiveKind::teacher_student;
  throw InputError("unknown objective '" + std::string(name) + "' (expected nqm or teacher-student)");
}

std::string_view to_string(ObjectiveKind kind) {
  return kind == ObjectiveKind::nqm ? "nqm" : "teacher-student";
}

InnerOptimizerKind parse_inner_optimizer(std::string_view name) {
  if (name == "sgd") return InnerOptimizerKind::sgd;
  if (name == "adamw") return InnerOptimizerKind::adamw;
  throw InputError("unknown inner optimizer '" + std::string(name) + "' (expected sgd or adamw)");
}

std::string_view to_string(InnerOptimizerKind kind) {
  return kind == InnerOptimizerKind::sgd ? "sgd" : "adamw";
}

WorkerParams parse_worker_params(std::string_view name) {
  if (name == "fp32") return WorkerParams::fp32;
  if (name == "bf16") return WorkerParams::bf16;
  throw InputError("unknown worker params '" + std::string(name) + "' (expected fp32 or bf16)");
}
std::string_view to_string(WorkerParams params) {
  return params == WorkerParams::fp32 ? "fp32" : "bf16";
}

LrScale parse_lr_scale(std::string_view name) {
  if (name == "none") return LrScale::none;
  if (name == "mup") return LrScale::mup;
  throw InputError("unknown lr scale '" + std::string(name) + "' (expected none or mup)");
}
std::string_view to_string(LrScale scale) {
  return scale == LrScale::none ? "none" : "mup";
}

FragmentProgress parse_fragment_progress(std::string_view name) {
  if (name == "keep") return FragmentProgress::keep;
  if (name == "discard") return FragmentProgress::discard;
  throw InputError("unknown fragment progress '" + std::string(name) + "' (expected keep or discard)");
}
std::string_view to_string(FragmentProgress progress) {
  return progress == FragmentProgress::keep ? "keep" : "discard";
}

theory::DelayKind parse_delays(std::string_view name) {
  if (name == "constant") return theory::DelayKind::constant_from_start;
  if (name == "constant-clamped") return theory::DelayKind::constant;
  try {
    const theory::DelayKind kind = theory::parse_delay_kind(name);
    if (kind != theory::DelayKind::constant_from_start) return kind;
  } catch (const InputError&) {}
  throw InputError("unknown delay schedule '" + std::string(name) + "' (expected " + kDelayNames + ")");
}

std::string_view delays_name(theory::DelayKind kind) {
  if (kind == theory::DelayKind::constant_from_start) return "constant";
  if (kind == theory::DelayKind::constant) return "constant-clamped";
  return theory::to_string(kind);
}

std::int64_t arrival_rounds(theory::DelayKind delays, long tau, std::int64_t rounds_run) {
  if (delays != theory::DelayKind::constant_from_start) return rounds_run;
  return std::max<std::int64_t>(rounds_run - tau, 0);
}

void validate(const SimulationSpec& spec) {
  const std::size_t size_limit = spec.objective == ObjectiveKind::nqm ? kMaxNqmDimension : kMaxHiddenWidth;
  if (spec.size < 1 || spec.size > size_limit) {
    throw InputError(std::string(to_string(spec.objective)) + " size must lie in [1, " + std::to_string(size_limit) +
                     "], got " + std::to_string(spec.size));
  }
  require_count(static_cast<std::int64_t>(spec.workers), kMaxWorkers, "workers K");
  require_count(spec.rounds, kMaxRounds, "rounds");
  require_count(spec.log_every, kMaxRounds, "log-every");
  validate_inner(spec.inner);
  require_nonnegative(spec.nqm_noise, "nqm noise");
  require_nonnegative(spec.label_noise, "label noise");
  if (spec.tau < 0 || spec.tau > kMaxTau) {
    throw InputError("tau must lie in [0, " + std::to_string(kMaxTau) + "], got " + std::to_string(spec.tau));
  }
  if (!(spec.divergence_factor > 1) || !std::isfinite(spec.divergence_factor)) {
    throw InputError("divergence factor must be finite and > 1, got " + shown(spec.divergence_factor));
  }
  validate_objective_shape(spec);
  const std::size_t parameters = parameter_count(spec.objective, spec.size, spec.depth);
  const double bytes = static_cast<double>(parameters) * bytes_per_parameter(spec) + curve_bytes(spec);
  if (bytes > kMaxStateBytes) {
    throw InputError(
        "the run's buffers (snapshot ring, workers' inner states and copies, optimizer state, scratch, "
        "loss curve) would take " +
        shown(bytes / (1024.0 * 1024.0)) +
        " MiB, over the 1024 MiB limit: lower tau, workers, size or rounds/log-every");
  }
  validate_outer(spec, parameters);
  validate_lr_scale(spec);
}

SimulationResult run_simulation(const SimulationSpec& spec,
                                const std::function<void(std::int64_t, std::int64_t)>& progress,
                                ArrivalRecorder* recorder) {
  validate(spec);
  return spec.outer.params == fastpath::ParamFormat::bf16 ? run<fastpath::bf16>(spec, progress, recorder)
                                                          : run<float>(spec, progress, recorder);
}

}  // namespace cgad::simulate
