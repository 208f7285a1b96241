#pragma once
// The rounding-noise study's engine: the fast path (bf16 or fp32 parameters, any state format) and the MPFR
// reference (reference::make_optimizer<mpfr_real>, with the same float hyperparameters) run in lockstep on
// one synthetic pseudo-gradient stream, never re-synchronized, so the fast path's rounding errors accumulate
// exactly as they would in training. The reference is fed the very floats the fast path sees (Δ, and θ0
// rounded to bf16), so every difference is the fast path's rounding.
//
// Stream (reference/random.hpp's Philox streams, not std:: distributions, whose draws differ between standard
// libraries): element i has a fixed scale s_i = R^−w_i, w_i uniform in [0, 1] — magnitudes log-uniform over [1/R, 1]
// (`--scale-range R`; R = 10^5 by default, wide enough that v/absmax in a 256-block falls below the unsigned
// map's smallest nonzero code, ~1.6·10^-7 of the absmax, where v stores 0; R = 64 was the old stream, whose
// blocks never reach it) — and each event's Δ_i = s_i·z, z standard normal, rounded to float, or exactly 0
// with probability F (`--zero-fraction`, as rows of an embedding get). Or a recorded stream (`--stream FILE`,
// a replay JSONL: its parameters, tensors, gradients and delays). Delays of the synthetic stream:
//   paper — τ uniform over {0, 1, 2, 4, 8, 16} (the paper's grid);
//   heavy — 70 % paper, 30 % τ = ⌊8/U⌋ (Pareto, index 1): P(τ ≥ 32 = τ_cut) = 7.5 % of all events.
#include "cgad/differential/replay_stream.hpp"

#include "cgad/fastpath/config.hpp"
#include "cgad/reference/random.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cgad::differential {

struct NoiseScenario {
  core::OptimizerKind optimizer = core::OptimizerKind::cgad;
  core::ZeroGatePolicy on_zero_gate = core::ZeroGatePolicy::apply;
  fastpath::ParamFormat params = fastpath::ParamFormat::bf16;
  fastpath::StateFormat state = fastpath::StateFormat::q8;
  fastpath::Rounding rounding = fastpath::Rounding::nearest;
  fastpath::Q8Semantics q8_semantics = fastpath::Q8Semantics::cgad;
  fastpath::VMap v_map = fastpath::VMap::dynamic;  // q8 state only (fastpath::validate)
  std::optional<std::size_t> min_q8_size;          // StepConfig's: unset is 4096 with bnb semantics, 0 with cgad
  std::string delays = "heavy";                    // paper | heavy
  std::size_t size = 1024;
  std::int64_t steps = 10000;
  std::int64_t log_every = 100;
  std::uint64_t seed = 1;
  double scale_range = 1e5;    // R: magnitudes log-uniform over [1/R, 1]
  double zero_fraction = 0.0;  // F: share of exact zeros in each event
  // A recorded stream instead of the synthetic one (size, steps, delays, scale_range, zero_fraction unused).
  std::shared_ptr<const PseudoGradientStream> stream;
  std::string stream_name;  // for the scenario name
};

// Statistics over the elements at one logged step. v: relative error (v_fast − v_ref)/v_ref over elements
// with v_ref > 0; m: (m_fast − m_ref)/sqrt(v_ref), the error in the units the update divides by (m itself
// crosses zero, where a relative error means nothing); θ: (θ_fast − θ_ref)/η, the drift in steps.
struct ErrorSummary {
  double mean_abs = 0, rms = 0, max_abs = 0, bias = 0;  // bias: the signed mean
};

// The fast path's own view of the trap (the reference has no codes), counted by fastpath/trap_counter.hpp as the
// simulation counts it: at this step, the share of elements whose stored v (m) decodes to exactly 0; over all
// element-steps so far, the share whose |Δθ| exceeded 5η, and the largest |Δθ|/η — with the reference's largest
// beside it.
struct TrapSummary {
  double v_zero_fraction = 0, m_zero_fraction = 0;
  double step_over_5lr_fraction = 0, max_step_over_lr = 0, reference_max_step_over_lr = 0;
};

// The same statistics over the elements of one tensor of the run's layout (a recorded stream's "tensors"; the
// synthetic stream is one tensor), each with its own trap counter.
struct TensorSample {
  ErrorSummary v, m, theta;
  TrapSummary trap;
};

struct NoiseSample {
  std::int64_t step = 0;
  ErrorSummary v, m, theta;
  TrapSummary trap;
  std::int64_t gated_to_zero = 0;     // events so far whose σ was exactly 0 (applied or skipped)
  std::vector<TensorSample> tensors;  // per tensor of NoiseRun::tensors, in order
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
  std::vector<std::size_t> tensors;  // the layout the fast path ran (sizes, summing to the parameter count)
};

// "cgad" / "cgad-skip" / "adam-decay" / "adam" → optimizer and policy; InputError otherwise.
void parse_study_optimizer(const std::string& name, NoiseScenario& scenario);
std::string study_optimizer_name(const NoiseScenario& scenario);
std::string scenario_name(const NoiseScenario& scenario);
void validate(const NoiseScenario& scenario);

// The delays of the synthetic stream, one per event (deterministic in the seed: reference/random.hpp's Philox
// stream, the same on every standard library).
class DelayStream {
 public:
  DelayStream(const std::string& kind, std::uint64_t seed);
  std::int64_t next();

 private:
  bool heavy_;
  reference::PhiloxStream random_;
};

// What a study's runs take in memory, so that one that would exhaust it is refused before it starts
// (`--steps 1e7 --log-every 1` used to take 1.8 GB per scenario): `kept`, the samples and final state a run
// returns (a study holds every run's until it prints them), and `working`, what it holds besides while it runs
// (both optimizers' state, the stream's scales, the event) — estimates from the element, tensor and sample counts
// (a tensor costs in every sample whatever its size), with an MPFR number counted at the current working
// precision.
struct NoiseMemory {
  double kept = 0, working = 0;
};
NoiseMemory estimated_memory(const NoiseScenario& scenario);
// The most a study may take: 1 GiB, as a simulate run (simulate/src/simulation.cpp).
inline constexpr double kMaxNoiseStudyBytes = 1024.0 * 1024.0 * 1024.0;
// InputError naming the estimate when every run's kept bytes plus the largest working set exceed the limit.
void check_memory(const std::vector<NoiseScenario>& scenarios);

// Runs one scenario; `progress(done, total)` is called after every step (a progress bar; a Python caller looks
// for Ctrl-C there, and may throw to end the run). The MPFR precision must have been set by the caller (it is
// process-global).
NoiseRun run_lockstep(const NoiseScenario& scenario, const std::function<void(long, long)>& progress);

}  // namespace cgad::differential
