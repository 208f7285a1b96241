#include "cgad/theory/trajectory.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/reference/optimizers.hpp"

#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

namespace cgad::theory {

using reference::mpfr_real;

namespace {

// Independent streams from one user seed: objective data, x_0, delays, noise (splitmix64's increment keeps
// the derived seeds far apart).
constexpr std::uint64_t kStream = 0x9E3779B97F4A7C15ULL;
std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t index) {
  return seed + index * kStream;
}

double unit(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * 0x1p-53;
}

mpfr_real dot(const std::vector<mpfr_real>& a, const std::vector<mpfr_real>& b) {
  mpfr_real sum(0);
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void validate_trajectory(const TrajectoryConfig& c) {
  core::validate(c.gate);
  if (c.dimension < 1 || c.dimension > kMaxTrajectoryDimension) {
    throw core::InputError("dimension must be in [1, " + std::to_string(kMaxTrajectoryDimension) + "]");
  }
  if (c.tau_max < 0 || c.tau_max > kMaxTrajectoryTauMax) {
    throw core::InputError("tau-max must be an integer in [0, " + std::to_string(kMaxTrajectoryTauMax) + "], got " +
                           std::to_string(c.tau_max));
  }
  if (c.steps < 1 || c.steps > kMaxTrajectorySteps) {
    throw core::InputError("steps must be an integer in [1, " + std::to_string(kMaxTrajectorySteps) + "], got " +
                           std::to_string(c.steps));
  }
  if (!core::is_finite(c.eta) || !(c.eta > 0)) {
    throw core::InputError("eta must be finite and > 0, got " + core::show(c.eta));
  }
  if (c.noise && !(*c.noise >= 0 && *c.noise < 1)) {
    throw core::InputError("noise level must be in [0, 1), got " + std::to_string(*c.noise));
  }
  if (c.update == UpdateKind::gated_adam) {
    core::require_unit_interval(c.adam.beta1, "beta1");
    core::require_unit_interval(c.adam.beta2, "beta2");
    core::require_positive(c.adam.eps, "eps");
  }
}

namespace {

core::OptimizerKind adam_kind(core::GateKind gate) {
  switch (gate) {
    case core::GateKind::cosine:
      return core::OptimizerKind::cgad;
    case core::GateKind::exponential:
      return core::OptimizerKind::adam_decay;
    case core::GateKind::none:
      return core::OptimizerKind::adam;
  }
  throw std::logic_error("unknown gate kind");
}

mpfr_real distance(const std::vector<mpfr_real>& a, const std::vector<mpfr_real>& b) {
  mpfr_real sum(0), diff;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = a[i] - b[i];
    sum += diff * diff;
  }
  using boost::multiprecision::sqrt;
  return mpfr_real(sqrt(sum));
}

// The rounding tolerance of one inequality check. Every sum is accumulated in correctly rounded MPFR
// operations, at most (4d + 16) per step (gradient, noise, clip, dot products, update, f), each adding a
// relative error ≤ u = 2^{−p} of a quantity bounded by the magnitudes summed here; so the computed
// lhs − rhs differs from the exact one by at most T·(4d + 16)·u·(|lhs| + |rhs| + |f0/η| + |f_T/η|).
mpfr_real rounding_tolerance(long T, std::size_t d, const mpfr_real& magnitude) {
  const mpfr_real u = ldexp(mpfr_real(1), -static_cast<int>(reference::working_precision_bits()));
  return mpfr_real(mpfr_real(T) * mpfr_real(4 * d + 16) * u * magnitude);
}

void check(InequalityState& state, long T, std::size_t d, const mpfr_real& extra_magnitude) {
  using boost::multiprecision::abs;
  const mpfr_real magnitude = abs(state.lhs) + abs(state.rhs) + extra_magnitude;
  if (!state.first_violation && state.lhs > state.rhs + rounding_tolerance(T, d, magnitude)) {
    state.first_violation = T;
  }
}

}  // namespace

UpdateChoice parse_update(std::string_view name) {
  if (name == "ideal") return {UpdateKind::ideal, std::nullopt};
  if (name == "cgad-adam") return {UpdateKind::gated_adam, core::GateKind::cosine};
  if (name == "adam-decay-adam") return {UpdateKind::gated_adam, core::GateKind::exponential};
  if (name == "adam") return {UpdateKind::gated_adam, core::GateKind::none};
  throw core::InputError("unknown update '" + std::string(name) + "' (expected " + kUpdateNames + ")");
}

std::string update_name(UpdateKind kind, core::GateKind gate) {
  if (kind == UpdateKind::ideal) {
    switch (gate) {
      case core::GateKind::cosine:
        return "ideal cgad";
      case core::GateKind::exponential:
        return "ideal adam-decay";
      case core::GateKind::none:
        return "ideal ungated";
    }
  } else {
    switch (gate) {
      case core::GateKind::cosine:
        return "cgad-adam";
      case core::GateKind::exponential:
        return "adam-decay-adam";
      case core::GateKind::none:
        return "adam";
    }
  }
  return "?";
}

std::unique_ptr<Objective<mpfr_real>> trajectory_objective(const TrajectoryConfig& config) {
  return make_objective<mpfr_real>(config.objective, config.dimension, stream_seed(config.seed, 1));
}

std::vector<mpfr_real> trajectory_initial_point(const TrajectoryConfig& config) {
  std::vector<mpfr_real> x(config.dimension);
  std::mt19937_64 engine(stream_seed(config.seed, 2));
  for (auto& xi : x) xi = mpfr_real(6 * unit(engine) - 3);  // x_0 uniform in [−3, 3]^d
  return x;
}

long integer_argmax_tau_sigma(const UpdateGate& gate, long tau_max) {
  core::validate(gate);
  long best = 0;
  mpfr_real best_value(0);
  for (long tau = 1; tau <= tau_max; ++tau) {
    const mpfr_real t(tau);
    const mpfr_real value = t * core::sigma(t, gate);
    if (value > best_value) {
      best_value = value;
      best = tau;
    }
  }
  return best;
}

TrajectoryReport run_trajectory(const TrajectoryConfig& config,
                                const std::function<void(const TrajectoryPoint&)>& on_step,
                                const std::function<void(long, long)>& on_progress) {
  validate_trajectory(config);
  using boost::multiprecision::abs;
  using boost::multiprecision::sqrt;
  const std::size_t d = config.dimension;
  const bool ideal = config.update == UpdateKind::ideal;
  const auto objective = trajectory_objective(config);

  TrajectoryReport report;
  report.update = config.update;
  report.ideal_forms_claimed = ideal;
  report.steps = config.steps;
  report.eta = config.eta;
  report.L = objective->smoothness();
  report.f_star = objective->lower_bound();
  const double s = config.noise.value_or(objective->default_noise());
  report.noise = mpfr_real(s);
  report.rho = ideal ? mpfr_real(1 - report.noise) : mpfr_real(0);

  std::vector<mpfr_real> x = trajectory_initial_point(config);
  std::vector<mpfr_real> grad(d), u(d), step(d);
  if (!ideal) {
    report.G = mpfr_real(0);
  } else if (const auto bound = objective->gradient_bound()) {
    report.G = mpfr_real((1 + report.noise) * *bound);
  } else {
    objective->gradient(x, grad);
    report.G = mpfr_real((1 + report.noise) * sqrt(dot(grad, grad)));
  }
  report.f0 = objective->value(x);

  // The real update: the reference optimizer itself, at the run's η, with the gate of config.gate.
  std::unique_ptr<reference::OuterOptimizer<mpfr_real>> adam;
  if (!ideal) {
    core::OptimizerConfig<mpfr_real> oc;
    oc.optimizer = adam_kind(config.gate.kind);
    oc.adam.lr = config.eta;
    oc.adam.beta1 = config.adam.beta1;
    oc.adam.beta2 = config.adam.beta2;
    oc.adam.eps = config.adam.eps;
    oc.adam.weight_decay = mpfr_real(0);
    oc.alpha = config.gate.alpha;
    oc.tau_cut = config.gate.tau_cut;
    oc.on_zero_gate = config.adam.on_zero_gate;
    adam = reference::make_optimizer(oc, d);
  }

  // σ(τ) for every τ the run can see, and the adversary's τ, both from core::sigma.
  std::vector<mpfr_real> sigma_table(static_cast<std::size_t>(config.tau_max) + 1);
  for (long tau = 0; tau <= config.tau_max; ++tau) sigma_table[tau] = core::sigma(mpfr_real(tau), config.gate);
  report.adversarial_tau = integer_argmax_tau_sigma(config.gate, config.tau_max);
  DelaySchedule schedule(config.delays, config.tau_max, stream_seed(config.seed, 3), report.adversarial_tau);
  std::mt19937_64 noise_engine(stream_seed(config.seed, 4));

  // x_{t−τ} for τ ≤ τ_max: a ring of the last τ_max + 1 iterates.
  const std::size_t ring = static_cast<std::size_t>(std::min(config.tau_max, config.steps)) + 1;
  std::vector<std::vector<mpfr_real>> history(ring, x);

  const mpfr_real lg2 = mpfr_real(report.L * report.eta * report.G * report.G);  // LηG²
  const mpfr_real head_design = mpfr_real((report.f0 - report.f_star) / report.eta);
  mpfr_real sum_aligned(0), sum_inner(0), sum_realized_inner(0), sum_abs_realized_inner(0), sum_tau(0);
  const long progress_every = std::max(1L, config.steps / 200);

  const mpfr_real zero(0);
  for (long t = 0; t < config.steps; ++t) {
    const long drawn = schedule.next();
    // constant-from-start: an update that would read an iterate before x_0 does not exist yet; the step is
    // idle (x_{t+1} = x_t, no optimizer call) and enters every sum with σ_t = 0, τ_t = 0.
    if (config.delays == DelayKind::constant_from_start && drawn > t) {
      ++report.idle_steps;
      history[static_cast<std::size_t>(t + 1) % ring] = x;
      const long T = t + 1;
      const mpfr_real f = objective->value(x);
      if (ideal) {
        const mpfr_real staleness = mpfr_real(lg2 * (report.sum_sigma_tau + report.sum_sigma_squared / 2));
        report.descent.rhs = mpfr_real((report.f0 - f) / report.eta + staleness);
        report.design.rhs = mpfr_real(head_design + staleness);
      }
      report.realized.rhs =
          mpfr_real(report.f0 - f + report.realized_bias_sum + report.L * report.sum_step_squared / 2);
      report.bias = mpfr_real(report.sum_sigma_tau / T);
      report.f_final = f;
      if (on_step) {
        on_step(TrajectoryPoint{T, 0, zero, f, &report.descent, &report.design, report.bias, report.realized_bias_sum,
                                &report.realized, &x});
      }
      if (on_progress && (T % progress_every == 0 || T == config.steps)) on_progress(T, config.steps);
      continue;
    }
    const long tau = std::min(drawn, t);
    report.realized_tau_max = std::max(report.realized_tau_max, tau);
    const mpfr_real& sigma = sigma_table[static_cast<std::size_t>(tau)];
    const std::vector<mpfr_real>& stale = history[static_cast<std::size_t>(t - tau) % ring];
    const std::vector<mpfr_real>& current = history[static_cast<std::size_t>(t) % ring];  // x_t
    objective->gradient(stale, grad);

    for (std::size_t i = 0; i < d; ++i) {
      u[i] = s == 0 ? grad[i] : mpfr_real(grad[i] * (1 + report.noise * mpfr_real(2 * unit(noise_engine) - 1)));
    }
    const mpfr_real grad_sq = dot(grad, grad);
    mpfr_real inner;  // ⟨∇f(x_{t−τ_t}), u_t⟩
    if (ideal) {
      const mpfr_real norm = sqrt(dot(u, u));
      if (norm > report.G) {
        ++report.clipped_steps;
        const mpfr_real scale = report.G / norm;
        for (auto& ui : u) ui *= scale;
      }
      inner = dot(grad, u);
      if (!report.alignment_failure && inner < report.rho * grad_sq) report.alignment_failure = t;
      for (std::size_t i = 0; i < d; ++i) x[i] -= report.eta * sigma * u[i];
    } else {
      // u holds the pseudo-gradient Δ_t = D_t ∘ ∇f(x_{t−τ_t}); the optimizer moves x by η·m̂/(√v̂ + ε).
      const auto applied = adam->apply(x, reference::Event<mpfr_real>{std::span<const mpfr_real>(u), tau, 0});
      if (!applied.applied) ++report.refused_steps;
      adam->advance_round();
    }
    // The realized step δ_t = x_t − x_{t+1}, and for the Adam update its normalized step u_t = δ_t/η.
    for (std::size_t i = 0; i < d; ++i) step[i] = current[i] - x[i];
    const mpfr_real step_norm = sqrt(dot(step, step));
    if (!ideal) {
      for (std::size_t i = 0; i < d; ++i) u[i] = step[i] / report.eta;
      inner = dot(grad, u);
    }
    const mpfr_real u_norm = ideal ? mpfr_real(sqrt(dot(u, u))) : mpfr_real(step_norm / report.eta);
    if (u_norm > report.step_bound) report.step_bound = u_norm;
    if (grad_sq > 0) {
      const mpfr_real alignment = inner / grad_sq;
      if (!report.min_alignment || alignment < *report.min_alignment) report.min_alignment = alignment;
      if (inner < 0) ++report.unaligned_steps;
    }
    report.realized_bias_sum += report.L * distance(current, stale) * step_norm;
    report.sum_step_squared += step_norm * step_norm;
    const mpfr_real realized_inner = dot(grad, step);
    sum_realized_inner += realized_inner;
    sum_abs_realized_inner += abs(realized_inner);
    history[static_cast<std::size_t>(t + 1) % ring] = x;

    const long T = t + 1;
    sum_tau += tau;
    report.sum_sigma_tau += sigma * tau;
    report.sum_sigma_squared += sigma * sigma;
    const mpfr_real f = objective->value(x);
    if (ideal) {
      sum_aligned += sigma * grad_sq;
      sum_inner += sigma * inner;
      const mpfr_real staleness = mpfr_real(lg2 * (report.sum_sigma_tau + report.sum_sigma_squared / 2));
      report.descent.lhs = sum_inner;
      report.descent.rhs = mpfr_real((report.f0 - f) / report.eta + staleness);
      check(report.descent, T, d, mpfr_real((abs(report.f0) + abs(f)) / report.eta));
      report.design.lhs = mpfr_real(report.rho * sum_aligned);
      report.design.rhs = mpfr_real(head_design + staleness);
      if (!report.alignment_failure) check(report.design, T, d, abs(head_design));
    }
    // The realized form holds for any points (the iterates as stored, rounded or not), so only the evaluation
    // of f, ∇f, the norms and the sums rounds: the same budget as above with a larger operation count.
    report.realized.lhs = sum_realized_inner;
    report.realized.rhs = mpfr_real(report.f0 - f + report.realized_bias_sum + report.L * report.sum_step_squared / 2);
    check(report.realized, T, 4 * d, abs(report.f0) + abs(f) + sum_abs_realized_inner);

    report.bias = mpfr_real(report.sum_sigma_tau / T);
    report.f_final = f;
    if (on_step) {
      on_step(TrajectoryPoint{T, tau, sigma, f, &report.descent, &report.design, report.bias, report.realized_bias_sum,
                              &report.realized, &x});
    }
    if (on_progress && (T % progress_every == 0 || T == config.steps)) on_progress(T, config.steps);
  }
  report.mean_tau = mpfr_real(sum_tau / config.steps);
  if (report.step_bound > 0) {
    report.realized_bias = mpfr_real(report.realized_bias_sum / (report.L * report.eta * report.eta *
                                                                 report.step_bound * report.step_bound * config.steps));
  }
  return report;
}

}  // namespace cgad::theory
