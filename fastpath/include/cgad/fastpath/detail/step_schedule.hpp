#pragma once
// A step's schedule: from the optimizer's counters (t per fragment, the last synchronization round per fragment,
// the round, the applied-step count) and one event (τ, fragment) to the step's fp32 constants, and from the step's
// outcome back to the counters. Written once for g++ and nvcc: the CPU backend runs it on the planner's counters in
// host memory, the CUDA backend in a one-thread kernel on counters in device memory, so that a CUDA step never
// waits on the host (t advances only if the previous step applied, which only the device knows) and can be
// captured in a CUDA graph, with the same bits on both backends.
//
// What cannot be computed identically on both sides is left to the host, which computes it as before:
//   - σ(τ) and whether γ(τ) = 0, for the event's τ (staleness.hpp: the float nearest the reference's σ): StepEvent;
//   - σ(a) for PA-CGAD's ages a (the reference's GatedAdam gates an event by σ(max(τ, a_f))): a table over the
//     ages whose γ is not 0, built once (step_planner.cpp); an age past it has γ = 0.
// The bias corrections 1 − β^t are computed here, for any t: β^t by binary powering in double-double (error-free
// products with fma; a squaring doubles the relative error it is given, so the errors add up to about t·2^-104,
// below 2^-70 wherever β^t is not 0 in double for a float β < 1), correctly rounded to double except close to a
// midpoint. The base is the constants' double-double β (derived_constants.hpp): cgad semantics' β of the user's
// decimal (within 2^-53·(1 − β) of it, so RN_f(1 − β^t) is the float nearest the reference's 1 − β^t except within
// about 2^-52 (relative) or 2^-54 (absolute: RN_d of β^t, large against a small 1 − β^t where β is near 1) of a float
// midpoint), bnb semantics' float β. For a float β the floats the step uses, 1 − RN_f(β^t) and
// RN_f(1 − β^t), are those std::pow gave: over t ≤ 2^24 and β ∈ {0, 0.5, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999,
// 0.99999, 0.999999} not one of the 3.4·10^8 floats differs, while the doubles differ in up to 14366 of 2^24 t for
// one β (glibc's pow is not correctly rounded). The test (proptests/fastpath/fastpath_schedule_test.cpp) checks the
// power against MPFR and the floats against std::pow's (t ≤ 2^16; fastpath_schedule_long_test t ≤ 2^24);
// proptests/fastpath/fastpath_beta_complement_test.cpp checks the decimal's against MPFR.
//
// Ages follow the reference's GatedAdam (reference/detail/gated_adam.hpp): a_f = max(0, round − last_sync_f − 1); an
// event for fragment f synchronizes f whether it is applied or skipped for a zero gate; an event refused for a NaN/Inf
// or overflowing pseudo-gradient changes nothing.
#include "cgad/fastpath/detail/block_step.hpp"
#include "cgad/fastpath/portable.hpp"

#include <cstdint>

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace cgad::fastpath {

// What the configuration fixes for every step (StepPlanner::schedule_constants()).
struct ScheduleConstants {
  UpdateFamily family = UpdateFamily::adam;
  bool ages = false;            // PA-CGAD: the gate sees max(τ, a_f)
  bool skip_zero_gate = false;  // on_zero_gate = skip: an event whose γ is 0 is not applied
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;  // Adam family
  // 1 − β and the bias corrections' bases β = hi + lo, per the q8 semantics (derived_constants.hpp)
  float one_minus_beta1 = 0, one_minus_beta2 = 0;
  double base1_hi = 0, base1_lo = 0, base2_hi = 0, base2_lo = 0;
  float momentum = 0, nesterov_lr = 0;  // Nesterov family
  const float* age_sigma = nullptr;     // σ(a) for ages a < age_sigma_size (host or device memory)
  std::uint64_t age_sigma_size = 0;     // γ(a) = 0 for every a ≥ age_sigma_size
};

// One event, as the host sees it.
struct StepEvent {
  std::int64_t tau = 0;
  std::uint64_t fragment = 0;
  float sigma_tau = 1.0f;      // σ(τ) (Adam family), 1/(1 + τ) (SDM), 1 (Nesterov)
  bool zero_gate_tau = false;  // skip_zero_gate and γ(τ) = 0
};

// The counters, wherever they live: t and last_sync have one entry per fragment (last_sync −1 before the first
// synchronization). CounterValues reads them (the schedule), CounterView changes them (the commit).
struct CounterValues {
  const std::int64_t* t = nullptr;
  const std::int64_t* last_sync = nullptr;
  std::int64_t round = 0;
  std::uint64_t steps = 0;
};
struct CounterView {
  std::int64_t* t = nullptr;
  std::int64_t* last_sync = nullptr;
  std::int64_t* round = nullptr;
  std::uint64_t* steps = nullptr;
};

// What the schedule decides before the step's data is looked at.
struct ScheduledStep {
  bool applied = true;  // false: the zero gate skips the event
  std::int64_t tau_effective = 0;
  float sigma = 1.0f;
  std::uint64_t step = 0;  // the applied-step count after this step (keys stochastic rounding)
  AdamCoefficients adam{};
  NesterovCoefficients nesterov{};
};

// How a step ended, in the reference's order of reports: a NaN/Inf in Δ first (even when the gate would skip the
// event), then a zero-gate skip, then an overflowing σ·Δ.
enum class StepOutcome : std::uint8_t { applied, zero_gate, nonfinite, overflow };

CGAD_HD inline double exact_fma(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// hi + lo ← (hi + lo)·(other_hi + other_lo) in double-double: the product of the high parts formed exactly (two_prod
// through fma), the cross terms added, renormalized by a fast two-sum; ~2^-104 relative error.
CGAD_HD inline void double_double_multiply(double& hi, double& lo, double other_hi, double other_lo) {
  const double product = hi * other_hi;
  double error = exact_fma(hi, other_hi, -product);
  error = error + (hi * other_lo + lo * other_hi);
  const double sum = product + error;
  lo = error - (sum - product);
  hi = sum;
}

// (base_hi + base_lo)^exponent (a double-double base in [0, 1], exponent ≥ 0) by binary powering in double-double,
// at most 2·63 products. Returns hi, the double nearest the double-double value. Deterministic: only IEEE +, × and
// fma, no contraction (the kernel is built with --fmad=false, the host with -ffp-contract=off).
CGAD_HD inline double exact_power(double base_hi, double base_lo, std::uint64_t exponent) {
  double result_hi = 1.0, result_lo = 0.0, square_hi = base_hi, square_lo = base_lo;
  while (exponent != 0) {
    if ((exponent & 1) != 0) double_double_multiply(result_hi, result_lo, square_hi, square_lo);
    exponent >>= 1;
    if (exponent != 0) double_double_multiply(square_hi, square_lo, square_hi, square_lo);
  }
  return result_hi;
}

// The Adam family's coefficients for step count t (after this step) and factor σ: the bias corrections as bnb's
// kernels use them (float, from β^t in double rounded once) and cgad's (1 − β^t in double, rounded once).
CGAD_HD inline AdamCoefficients adam_coefficients(const ScheduleConstants& c, float sigma, std::int64_t t) {
  const double power1 = exact_power(c.base1_hi, c.base1_lo, static_cast<std::uint64_t>(t));
  const double power2 = exact_power(c.base2_hi, c.base2_lo, static_cast<std::uint64_t>(t));
  const float correction1 = 1.0f - static_cast<float>(power1);
  const float correction2 = ieee_sqrt(1.0f - static_cast<float>(power2));
  AdamCoefficients a;
  a.sigma = sigma;
  a.beta1 = c.beta1;
  a.one_minus_beta1 = c.one_minus_beta1;
  a.beta2 = c.beta2;
  a.one_minus_beta2 = c.one_minus_beta2;
  a.bias1 = static_cast<float>(1.0 - power1);
  a.bias2 = static_cast<float>(1.0 - power2);
  a.lr = c.lr;
  a.eps = c.eps;
  a.weight_decay = c.weight_decay;
  a.step_size = (-c.lr * correction2) / correction1;
  a.eps_term = correction2 * c.eps;
  a.decay = 1.0f - c.lr * c.weight_decay;
  return a;
}

CGAD_HD inline std::int64_t fragment_age(const CounterValues& v, std::uint64_t fragment) {
  const std::int64_t age = v.round - v.last_sync[fragment] - 1;
  return age < 0 ? 0 : age;
}

// The step's constants from the counters; changes nothing.
CGAD_HD inline ScheduledStep schedule_step(const ScheduleConstants& c, const CounterValues& v, const StepEvent& e) {
  ScheduledStep s;
  s.step = v.steps + 1;
  s.tau_effective = e.tau;
  s.sigma = e.sigma_tau;
  if (c.family == UpdateFamily::nesterov) {
    s.nesterov = NesterovCoefficients{e.sigma_tau, c.momentum, c.nesterov_lr};
    return s;
  }
  bool zero_gate = e.zero_gate_tau;
  if (c.ages) {
    const std::int64_t age = fragment_age(v, e.fragment);
    if (age > e.tau) {  // σ is non-increasing: the older of the two decides
      s.tau_effective = age;
      const bool gated = static_cast<std::uint64_t>(age) < c.age_sigma_size;
      s.sigma = gated ? c.age_sigma[age] : 0.0f;
      zero_gate = c.skip_zero_gate && !gated;
    }
  }
  // A σ that only rounds to 0 in float (Adam-Decay past ατ ≈ 104) is applied: only γ = 0 skips.
  s.applied = !zero_gate;
  // t < 2^62 (StepPlanner::set_raw_counters), so t + 1 cannot overflow.
  if (s.applied) s.adam = adam_coefficients(c, s.sigma, v.t[e.fragment] + 1);
  return s;
}

CGAD_HD inline StepOutcome outcome_of(const ScheduledStep& s, bool nonfinite, bool overflow) {
  if (nonfinite) return StepOutcome::nonfinite;
  if (!s.applied) return StepOutcome::zero_gate;
  return overflow ? StepOutcome::overflow : StepOutcome::applied;
}

// Records the outcome: an applied step advances t_f and the step count; an applied or zero-gate-skipped event
// synchronizes its fragment (PA-CGAD); a refused one changes nothing.
CGAD_HD inline void commit_step(const ScheduleConstants& c, const CounterView& v, std::uint64_t fragment,
                                StepOutcome outcome) {
  if (outcome == StepOutcome::applied) {
    *v.steps += 1;
    if (c.family == UpdateFamily::adam) v.t[fragment] += 1;
  }
  if (c.ages && (outcome == StepOutcome::applied || outcome == StepOutcome::zero_gate)) {
    v.last_sync[fragment] = *v.round;
  }
}

// The scheduled constants into a step's arguments (StepPlanner::prepare's, or a chunk's on the device).
CGAD_HD inline void apply_schedule(StepArgs& a, const ScheduledStep& s) {
  a.adam = s.adam;
  a.nesterov = s.nesterov;
  a.step = s.step;
}

}  // namespace cgad::fastpath
