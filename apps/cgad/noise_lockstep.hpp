#pragma once
// The rounding-noise study's engine (issue 5): the fast path (bf16 or fp32 parameters, any state format) and the MPFR
// reference (reference::make_optimizer<mpfr_real>, with the same float hyperparameters) run in lockstep on
// one synthetic pseudo-gradient stream, never re-synchronized, so the fast path's rounding errors accumulate
// exactly as they would in training. The reference is fed the very floats the fast path sees (Δ, and θ0
// rounded to bf16), so every difference is the fast path's rounding.
//
// Stream: element i has a fixed scale s_i = 2^u_i, u_i uniform in [−6, 0] (so a q8 block spans the dynamic
// range a real layer has); each event's Δ_i = s_i·z, z standard normal, rounded to float. Delays:
//   paper — τ uniform over {0, 1, 2, 4, 8, 16} (the paper's grid);
//   heavy — 70 % paper, 30 % τ = ⌊8/U⌋ (Pareto, index 1): P(τ ≥ 32 = τ_cut) = 7.5 % of all events.
#include "cgad/fastpath/config.hpp"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace cgad::cli {

struct NoiseScenario {
  reference::OptimizerKind optimizer = reference::OptimizerKind::cgad;
  reference::ZeroGatePolicy on_zero_gate = reference::ZeroGatePolicy::apply;
  fastpath::ParamFormat params = fastpath::ParamFormat::bf16;
  fastpath::StateFormat state = fastpath::StateFormat::q8;
  fastpath::Rounding rounding = fastpath::Rounding::nearest;
  std::string delays = "heavy";  // paper | heavy
  std::size_t size = 1024;
  std::int64_t steps = 10000;
  std::int64_t log_every = 100;
  std::uint64_t seed = 1;
};

// Statistics over the elements at one logged step. v: relative error (v_fast − v_ref)/v_ref over elements
// with v_ref > 0; m: (m_fast − m_ref)/sqrt(v_ref), the error in the units the update divides by (m itself
// crosses zero, where a relative error means nothing); θ: (θ_fast − θ_ref)/η, the drift in steps.
struct ErrorSummary {
  double mean_abs = 0, rms = 0, max_abs = 0, bias = 0;  // bias: the signed mean
};

struct NoiseSample {
  std::int64_t step = 0;
  ErrorSummary v, m, theta;
  std::int64_t gated_to_zero = 0;  // events so far whose σ was exactly 0 (applied or skipped)
};

// Every element after the last step, fast path and reference side by side (the reference rounded to double),
// for per-element reports in format units.
struct FinalState {
  std::vector<double> theta_fast, theta_ref, m_fast, m_ref, v_fast, v_ref;
};

struct NoiseRun {
  NoiseScenario scenario;
  std::vector<NoiseSample> samples;
  FinalState last;
};

// "cgad" / "cgad-skip" / "adam-decay" / "adam" → optimizer and policy; InputError otherwise.
void parse_study_optimizer(const std::string& name, NoiseScenario& scenario);
std::string study_optimizer_name(const NoiseScenario& scenario);
std::string scenario_name(const NoiseScenario& scenario);
void validate(const NoiseScenario& scenario);

// The delay of event `k` of a stream (deterministic in the seed).
class DelayStream {
 public:
  DelayStream(const std::string& kind, std::uint64_t seed);
  std::int64_t next();

 private:
  bool heavy_;
  std::mt19937_64 rng_;
};

// Runs one scenario; `progress(done, total)` is called after every logged step. The MPFR precision must have
// been set by the caller (it is process-global).
NoiseRun run_lockstep(const NoiseScenario& scenario, const std::function<void(long, long)>& progress);

}  // namespace cgad::cli
