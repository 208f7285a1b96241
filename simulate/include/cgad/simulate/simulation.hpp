#pragma once
// One asynchronous DiLoCo run at small scale: K workers, each running H inner steps (SGD or AdamW, fp32)
// from the global parameters it last received, send Δ = θ_start − θ_local; the server applies each Δ τ outer
// rounds after the round whose parameters it started from, with one of the seven outer optimizers. The outer
// step is the fast path's (fastpath::CpuOptimizer: bf16/fp32 parameters, fp32/bf16/q8 state, cgad's or
// bitsandbytes' semantics, the same step code `cgad replay --backend fastpath` runs), built over the objective's
// tensors (Objective::tensor_sizes: the MLP's W1, b1, w2, b2; the NQM's one vector), so that q8 blocks restart
// at each tensor and a tensor under outer.min_q8_size keeps fp32 state, as bitsandbytes quantizes each
// parameter tensor of a model separately. Delayed Nesterov, which has no fast path, runs the reference
// optimizer instantiated in float and is refused with any other format than fp32 parameters and fp32 state, and
// with bnb semantics (bitsandbytes has no Delayed Nesterov).
//
// The event model (one arrival per outer round): at round r the server draws τ_r from the delay schedule
// (τ_r ≤ r: nothing starts before θ_0), worker k = r mod K runs its H inner steps from θ_{r−τ_r} (the server's
// parameters at the start of round r − τ_r, kept in a ring of snapshots) with its own gradient stream and its
// own inner-optimizer state (kept across rounds, as in DiLoCo), and the server applies that Δ with staleness
// τ_r. The worker's H steps are computed when its result arrives (round r), not when it started (round
// r − τ_r). Its parameters and random stream make that harmless, but its inner-optimizer state (AdamW's m, v
// and step count) is carried from one of its jobs to the next in *arrival* order: the job arriving at round r
// starts from the state left by the same worker's job that arrived at round r − K. In simulated time that job
// started at r − K − τ_{r−K} and finished at r − K, while this one started at r − τ_r; when τ_r > K, this job
// started before that one finished, so it uses inner state from a job that, at its start, had not finished —
// state a real worker could not have had. With τ_r ≤ K the order is causal; SGD keeps no state and is exact
// for any τ.
//
// Delays (`delays`, simulate's names; theory/delays.hpp draws them): "constant" is a pipeline in steady state from
// round 0 — nothing arrives in rounds 0, …, τ − 1 (the server idles; the loss is still logged), and from round τ
// on every arrival is exactly τ old, so a constant-τ run has no start-up transient. "constant-clamped" is the old
// τ_r = min(τ, r) (the first τ rounds see fresher results), kept under that name for runs that used it. Every
// other schedule draws τ_r and clamps it to r (no result is older than θ_0).
//
// PA-CGAD with P fragments (streaming DiLoCo; fragment_progress.hpp has the model and its source): the event of
// round r carries one fragment's slice of Δ, and the server advances every fragment's age once per round, so a
// fragment synced every P rounds arrives with age P − 1 (the age counts the rounds that passed without a sync,
// fastpath/detail/step_planner.hpp) and PA-CGAD gates it by σ(max(τ, P − 1)); with P = 1 that is CGAD's σ(τ).
// `fragment_progress` says what a worker keeps of the fragments it did not sync: `keep` (default, torchft's
// streaming DiLoCo) keeps their local progress on the worker and sends it when their turn comes; `discard` (the
// old model) starts every job from the whole snapshot and throws the other fragments' progress away.
//
// Workers compute in fp32 or like a bf16 training run (`worker_params`, objectives.hpp says exactly what is bf16),
// and the learning rates can follow width by μP (`lr_scale`, lr_scale.hpp).
//
// Every run is deterministic in its spec (the problem seed fixes the objective; the run seed fixes the initial
// point and every worker's stream), whatever the thread count of the caller.
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/trap_counter.hpp"
#include "cgad/theory/delays.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::simulate {

enum class ObjectiveKind {
  nqm,              // noisy quadratic model, power-law spectrum; `size` = dimension
  teacher_student,  // two-layer tanh MLP regression on a fixed random teacher; `size` = student hidden width
};
ObjectiveKind parse_objective_kind(std::string_view name);  // "nqm" | "teacher-student"; InputError otherwise
std::string_view to_string(ObjectiveKind kind);

enum class InnerOptimizerKind { sgd, adamw };
// What a worker's parameters and arithmetic are (objectives.hpp, worker.hpp): fp32, or bf16 parameters, inputs,
// activations and gradients with fp32 accumulation and fp32 inner-optimizer state, as a bf16 training run.
enum class WorkerParams { fp32, bf16 };
// Whether learning rates and the readout's initialization follow the width (lr_scale.hpp).
enum class LrScale { none, mup };
// What a PA-CGAD worker keeps of the fragments it did not sync in a round (fragment_progress.hpp).
enum class FragmentProgress { keep, discard };
InnerOptimizerKind parse_inner_optimizer(std::string_view name);  // "sgd" | "adamw"; InputError otherwise
std::string_view to_string(InnerOptimizerKind kind);
WorkerParams parse_worker_params(std::string_view name);  // "fp32" | "bf16"
std::string_view to_string(WorkerParams params);
LrScale parse_lr_scale(std::string_view name);  // "none" | "mup"
std::string_view to_string(LrScale scale);
FragmentProgress parse_fragment_progress(std::string_view name);  // "keep" | "discard"
std::string_view to_string(FragmentProgress progress);
// The delay schedules by simulate's names (see above): "constant" is theory's constant_from_start,
// "constant-clamped" theory's constant, the others theory's own names.
theory::DelayKind parse_delays(std::string_view name);
std::string_view delays_name(theory::DelayKind kind);
inline constexpr const char* kDelayNames =
    "constant|constant-clamped|uniform|geometric|pareto|bursty|adversarial|heavy-tail";
// The rounds of a run of `rounds_run` rounds in which an event arrived: all of them, except the first τ of the
// constant schedule.
std::int64_t arrival_rounds(theory::DelayKind delays, long tau, std::int64_t rounds_run);
struct InnerConfig {
  InnerOptimizerKind kind = InnerOptimizerKind::adamw;
  std::int64_t steps = 8;  // H
  float lr = 0.01f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;  // AdamW only
};

// The outer optimizer's defaults: the fast path's (bf16 parameters, fp32 state, nearest rounding, CGAD's gate,
// Nesterov momentum μ 0.9) except the two learning rates, both set by one rule: with one arrival per round,
// K arrivals should move the server about as far as one round of synchronous DiLoCo, which applies its outer
// step once to the mean of K workers' Δ.
//  - Nesterov family (Nesterov, Delayed Nesterov, SDM): the DiLoCo recipe's lr 0.7 on the mean of K Δ's is
//    lr 0.7/K per arrival: 0.175 at the default K = 4. Applied per arrival, 0.7 itself made Nesterov leave the
//    default teacher-student problem's basin at τ = 0 (loss 0.53 → 14.5, 5 seeds), before staleness enters.
//  - Adam family (CGAD, PA-CGAD, Adam-Decay, Adam): an Adam step moves each coordinate by about its lr (the
//    bias-corrected m/sqrt(v) is O(1)) and one worker's round of AdamW by at most H × inner lr, so the
//    synchronous round's displacement is reached by lr = H × inner lr / K = 8 × 0.01 / 4 = 0.02 (the fast path's
//    1e-3 would be 20× slower; H × inner lr = 0.08 made the default teacher-student run blow up).
// Both are derived from the defaults only and do not follow H, K or the inner lr when those change. Each
// family's value serves all its members. The Nesterov value replaced 0.7 after that failure at τ = 0: a failure of
// the setup, not of staleness handling, and the change favours the baseline the paper argues against.
inline fastpath::StepConfig default_outer_config() {
  fastpath::StepConfig config;
  config.adam.lr = 0.02f;
  config.nesterov.lr = 0.175f;
  return config;
}

// Rounds between divergence checks (the last round is always checked too). Fixed, not log_every, so that how
// often the curve is logged cannot change which runs count as diverged, nor where they stop.
inline constexpr std::int64_t kDivergenceCheckEvery = 10;

struct SimulationSpec {
  ObjectiveKind objective = ObjectiveKind::nqm;
  std::size_t size = 64;
  std::uint64_t problem_seed = 0;  // the objective (NQM centres, teacher weights, evaluation set)
  // NQM gradient noise s: g_i = λ_i(x_i − c_i) + s·sqrt(λ_i)·z_i, z ~ N(0, 1), noise covariance s²·H (Zhang et
  // al. 2019's NQM, arXiv 1907.04164, whose minibatch-B noise is H/B: s = 1 is their batch size 1). 0: exact.
  // Default 1: the per-example noise of their model, so the noise floor, not the start, decides the final loss.
  double nqm_noise = 1.0;
  double label_noise = 0.1;  // teacher-student: standard deviation of the training labels' noise
  std::size_t depth = 1;     // teacher-student: the student's hidden layers (mlp.hpp), each `size` wide
  // teacher-student: the first `outlier_features` input dimensions have standard deviation `outlier_scale`
  // (objectives.hpp); 0 features or a scale of 1 give the plain N(0, I) inputs.
  std::size_t outlier_features = 0;
  double outlier_scale = 1.0;
  std::uint64_t seed = 1;     // the run: initial point, worker gradient streams, delay schedule
  std::size_t workers = 4;    // K
  std::int64_t rounds = 200;  // outer rounds = server steps
  InnerConfig inner;
  theory::DelayKind delays = theory::DelayKind::constant_from_start;  // "constant" (see above)
  long tau = 0;  // the fixed τ (constant) or τ_max (every other schedule); τ_r ≤ r always
                 // (adversarial: argmax τ·σ(τ) under CGAD's gate of outer.alpha/tau_cut,
                 // whatever the optimizer, so every method of a comparison sees one schedule)
  // Optimizer, formats, rounding, hyperparameters, P, q8 semantics (cgad or bnb) and min_q8_size; the step is
  // built over the objective's tensors (see above).
  fastpath::StepConfig outer = default_outer_config();
  // Run Delayed Nesterov (the reference's, in float, with outer.nesterov's lr and momentum) instead of
  // outer.optimizer; fp32 parameters and fp32 state only. outer.optimizer = delayed_nesterov means the same.
  bool delayed_nesterov = false;
  std::int64_t delayed_nesterov_buffer = 4;  // its N
  // Diverged: the loss, checked every kDivergenceCheckEvery rounds and at the last round (whatever log_every),
  // is not finite or above this × the initial loss. A logged loss between checks never ends a run.
  double divergence_factor = 1e3;
  // Rounds between losses recorded in the curve (the last round is always recorded). It decides only what the
  // curve shows: the loss is evaluated on the union of these rounds and the divergence checks, and the run's
  // outcome (final_loss, diverged, diverged_at) does not depend on it.
  std::int64_t log_every = 10;
  WorkerParams worker_params = WorkerParams::fp32;
  LrScale lr_scale = LrScale::none;
  FragmentProgress fragment_progress = FragmentProgress::keep;
};

// Throws core::InputError (one line) for anything that cannot run, including a run whose buffers (every
// per-parameter one counted: snapshot ring, outer and inner optimizer state, the workers' local copies, scratch;
// and the loss curve it records) would exceed 1 GiB.
void validate(const SimulationSpec& spec);

struct LossPoint {
  std::int64_t round = 0;  // outer rounds completed (server steps taken) when the loss was measured
  double loss = 0;
};

struct TensorTrap {
  std::string name;  // objectives.hpp's tensor_names
  std::size_t size = 0;
  fastpath::TrapCounts counts;
};

struct SimulationResult {
  double initial_loss = 0;
  double final_loss = 0;         // at the last round run (the divergence round for a diverged run)
  std::vector<LossPoint> curve;  // round 0 (the initial loss), every log_every rounds, and the last round run
  bool diverged = false;
  std::int64_t diverged_at = -1;  // the round it was detected (a multiple of kDivergenceCheckEvery or the last)
  std::string divergence;         // why: "non-finite loss" or "loss 1.2e+05 > 1e+03 x initial 1.1e+02"
  std::int64_t applied = 0, skipped_nonfinite = 0, skipped_zero_gate = 0;
  // Events refused because |σ·Δ| ≥ 2^64 for some element (finite, but its square overflows float; the fast path's
  // and the reference's overflow rule, docs/design.md §3): skipped whole, like a NaN/Inf one.
  std::int64_t skipped_overflowing = 0;
  std::int64_t inner_steps_skipped = 0;  // inner AdamW steps refused for a non-finite gradient (x left as is)
  double mean_tau = 0;                   // realized mean staleness over the arrivals
  double mean_tau_effective = 0;  // over the arrivals, the staleness the gate saw (max(τ, age) for PA-CGAD; else τ)
  // The trap the noise study measures (fastpath/trap_counter.hpp, the one counter of both), for the Adam family
  // (absent otherwise): the share of parameters whose stored v decodes to exactly 0 after the last round run; over
  // every element-step of the arrivals, the share with |Δθ| > 5η and the largest |Δθ|/η, η being the element's tensor's
  // outer lr.
  std::optional<double> v_zero_fraction, step_over_5lr_fraction, max_step_over_lr;
  std::optional<double> m_zero_fraction;  // the share whose stored m decodes to exactly 0, likewise
  // The same four metrics per tensor of the objective (Objective::tensor_sizes, named by tensor_names), so that
  // a trap that fires in one 8-bit tensor is not averaged away over the others (empty outside the Adam family).
  std::vector<TensorTrap> tensor_traps;
  // Not diverged, yet nothing a finished run is judged by happened: why (nothing arrived — a constant-τ run of at
  // most τ rounds; every inner step refused for a non-finite or overflowing gradient, so every Δ was 0; or every
  // arrival refused), else "". Reported as "stalled", never as a finished run's loss.
  std::string stalled;
  std::vector<float> final_params;  // the server's parameters after the last round run (bf16 widened exactly)
};

// What the server received in a run, in order (`cgad simulate --record-deltas` writes it as a replay stream):
// `start` once, before the first round, with the server's initial parameters θ_0 (bf16 ones widened exactly)
// and the objective's tensor sizes; then `arrival` once per round run, with the pseudo-gradient the outer step
// was given (PA-CGAD: the fragment's slice), its staleness τ and its fragment. Replaying these events through a
// fastpath::CpuOptimizer of the same StepConfig and tensor sizes, step then advance_round each, reproduces the
// run's final_params bit for bit (the run's outer step is exactly that). Delayed Nesterov's events are
// recorded too, though the fast path cannot replay them.
class ArrivalRecorder {
 public:
  virtual ~ArrivalRecorder() = default;
  virtual void start(std::span<const float> params, std::span<const std::size_t> tensors) = 0;
  virtual void arrival(std::span<const float> grad, std::int64_t tau, std::size_t fragment) = 0;
};

// Runs one spec (validated first). `progress(done, total)` is called at every logged round when given, and the
// recorder, when given, sees every event the server receives. A diverged run stops at the round divergence is
// detected and is returned as such; it never throws for it.
SimulationResult run_simulation(const SimulationSpec& spec,
                                const std::function<void(std::int64_t, std::int64_t)>& progress = {},
                                ArrivalRecorder* recorder = nullptr);

}  // namespace cgad::simulate
