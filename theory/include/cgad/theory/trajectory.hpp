#pragma once
// Trajectories in MPFR on the objectives of objectives.hpp under the delay schedules of delays.hpp, for two
// updates (theory/README.md §2, §9):
//
// * the IDEAL GATED UPDATE of docs/design.md §6, the update the theorem is about:
//     x_{t+1} = x_t − η·σ(τ_t)·u_t,   u_t = clip_G(D_t ∘ ∇f(x_{t−τ_t})),   D_t = diag(1 + s·ζ_{t,i}), ζ ~ U[−1, 1]
//   s ∈ [0, 1) is the multiplicative gradient-noise level (0 for the deterministic objectives, ½ by default for
//   the noisy quadratic). Without clipping ⟨∇f, u⟩ ≥ (1 − s)‖∇f‖², so the alignment constant is ρ = 1 − s, and
//   ‖u‖ ≤ (1 + s)‖∇f‖. G = (1 + s)·sup‖∇f‖ where the objective has a gradient bound (clipping never acts);
//   for the quadratic G = (1 + s)·‖∇f(x_0)‖ and the clip enforces ‖u‖ ≤ G, possibly at the cost of alignment,
//   which the run then checks step by step.
// * the REAL GATED-MOMENT ADAM UPDATE, the reference optimizer itself (reference::make_optimizer over mpfr_real:
//   CGAD, Adam-Decay or Adam, reference/detail/gated_adam.hpp) fed the pseudo-gradient Δ_t = D_t ∘ ∇f(x_{t−τ_t}) with
//   staleness τ_t and learning rate η. The gate acts inside m and v, so its step η·m̂/(√v̂ + ε) is not σ_t times
//   a bounded direction: the theorem does not cover it (A4 in particular fails for momentum), and only the
//   realized quantities below are reported for it.
// τ_t = min(schedule, t): no update reads an iterate before x_0 (constant-from-start instead idles until
// t = τ_max: no update, σ_t = τ_t = 0 in every sum). Both updates see the same objective, x_0,
// delays and noise for a seed.
//
// For the ideal update two forms of the theorem's inequality are checked after every step T:
//  * descent form (needs only L-smoothness and ‖u_t‖ ≤ G, always claimed):
//      Σ_{t<T} σ_t⟨∇f(x_{t−τ_t}), u_t⟩ ≤ (f(x_0) − f(x_T))/η + LηG²·Σ_{t<T}(σ_tτ_t + σ_t²/2)
//  * docs/design.md §6 form (claimed while ⟨∇f(x_{t−τ_t}), u_t⟩ ≥ ρ‖∇f(x_{t−τ_t})‖² has held at every step):
//      ρ·Σ_{t<T} σ_t‖∇f(x_{t−τ_t})‖² ≤ (f(x_0) − f*)/η + LηG²·Σ_{t<T}(σ_tτ_t + σ_t²/2)
//
// For both updates, with δ_t = x_t − x_{t+1} the realized step, the proof's steps 1–3 before A3 is used give,
// for ANY sequence of points and L-smooth f,
//  * realized form:  Σ_{t<T} ⟨∇f(x_{t−τ_t}), δ_t⟩ ≤ f(x_0) − f(x_T) + R_T + (L/2)·Σ_{t<T}‖δ_t‖²,
//      R_T = Σ_{t<T} L·‖x_t − x_{t−τ_t}‖·‖δ_t‖      (the staleness-bias term that step 2 bounds),
//  checked at every T, and R_T is reported normalized the way the ideal update's bound normalizes it: the
//  update written as δ_t = η·σ_t·u_t (ideal) or δ_t = η·u_t with u_t = m̂/(√v̂ + ε) (Adam, the gate inside u_t),
//  G_run = max_t ‖u_t‖ (the least G for which A3 holds on the run), and
//      realized_bias = R_T / (L·η²·G_run²·T).
//  Step 2 then gives realized_bias ≤ Σσ_tτ_t/T ≤ B1 for the ideal update, and realized_bias ≤ Σ_tτ_t/T (the
//  realized mean delay) for every update.
#include "cgad/core/gate.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/reference/real.hpp"
#include "cgad/theory/delays.hpp"
#include "cgad/theory/objectives.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::theory {

// Which σ the update applies: CGAD (cosine gate), Adam-Decay (e^{−ατ}), or ungated (σ ≡ 1).
using UpdateGate = core::GateParams<reference::mpfr_real>;

enum class UpdateKind { ideal, gated_adam };

// An update by its command-line name: "ideal" (its gate chosen separately), or a real gated-moment Adam update
// with the gate its name implies: "cgad-adam" (cosine), "adam-decay-adam" (exponential), "adam" (σ ≡ 1).
struct UpdateChoice {
  UpdateKind kind = UpdateKind::ideal;
  std::optional<core::GateKind> gate;  // set for the Adam updates
};
inline constexpr const char* kUpdateNames = "ideal|cgad-adam|adam-decay-adam|adam";
UpdateChoice parse_update(std::string_view name);  // InputError naming kUpdateNames on any other name
// "ideal cgad", "ideal adam-decay", "ideal ungated", "cgad-adam", "adam-decay-adam", "adam".
std::string update_name(UpdateKind kind, core::GateKind gate);

// The gated-moment Adam's own hyperparameters (its learning rate is the run's η; no weight decay).
struct AdamSettings {
  // Parsed as the reference's own defaults are (AdamHyper), so both round the same decimals the same way.
  reference::mpfr_real beta1 = core::parse_real<reference::mpfr_real>("0.9", "beta1");
  reference::mpfr_real beta2 = core::parse_real<reference::mpfr_real>("0.999", "beta2");
  reference::mpfr_real eps = core::parse_real<reference::mpfr_real>("1e-8", "eps");
  core::ZeroGatePolicy on_zero_gate = core::ZeroGatePolicy::apply;
};

inline constexpr long kMaxTrajectoryTauMax = 100'000;
inline constexpr long kMaxTrajectorySteps = 10'000'000;
inline constexpr std::size_t kMaxTrajectoryDimension = 4096;

struct TrajectoryConfig {
  ObjectiveKind objective = ObjectiveKind::geman_mcclure;
  std::size_t dimension = 8;
  DelayKind delays = DelayKind::uniform;
  long tau_max = 16;
  long steps = 1000;
  std::uint64_t seed = 1;
  UpdateGate gate{core::GateKind::cosine, reference::mpfr_real("0.2"), reference::mpfr_real(32)};
  reference::mpfr_real eta{"0.05"};
  std::optional<double> noise;  // s; empty: the objective's default
  UpdateKind update = UpdateKind::ideal;
  AdamSettings adam;  // used when update == gated_adam
};

struct InequalityState {
  reference::mpfr_real lhs{0}, rhs{0};
  std::optional<long> first_violation;  // the first T with lhs > rhs + rounding tolerance
};

struct TrajectoryPoint {
  long T = 0;
  long tau = 0;
  reference::mpfr_real sigma, f;
  const InequalityState* descent = nullptr;
  const InequalityState* design = nullptr;
  reference::mpfr_real bias;                             // Σ_{t<T} σ_tτ_t / T
  reference::mpfr_real realized_bias_sum;                // R_T
  const InequalityState* realized = nullptr;             // the realized form
  const std::vector<reference::mpfr_real>* x = nullptr;  // the iterate x_T
};

struct TrajectoryReport {
  UpdateKind update = UpdateKind::ideal;
  // G and ρ are the ideal theorem's A3/A4 constants (ideal update only; 0 for the Adam update).
  reference::mpfr_real L, f_star, G, rho, eta, noise, f0, f_final;
  long steps = 0;
  long realized_tau_max = 0;
  long adversarial_tau = 0;  // the integer argmax of τσ(τ) over {0..τ_max} for this gate
  reference::mpfr_real sum_sigma_tau{0}, sum_sigma_squared{0};
  reference::mpfr_real bias{0};           // Σσ_tτ_t / T
  InequalityState descent, design;        // the ideal theorem's forms; never claimed for the Adam update
  bool ideal_forms_claimed = true;        // update == ideal
  std::optional<long> alignment_failure;  // ideal: first step t where ⟨∇f, u⟩ < ρ‖∇f‖² (clipping); design form
                                          // is not claimed from then on
  long clipped_steps = 0;

  // Realized quantities, for both updates (see the header comment).
  reference::mpfr_real realized_bias_sum{0};  // R_T = Σ_t L·‖x_t − x_{t−τ_t}‖·‖x_{t+1} − x_t‖
  reference::mpfr_real step_bound{0};         // G_run = max_t ‖u_t‖
  reference::mpfr_real realized_bias{0};      // R_T/(L·η²·G_run²·T); 0 when G_run = 0
  reference::mpfr_real mean_tau{0};           // Σ_t τ_t / T
  reference::mpfr_real sum_step_squared{0};   // Σ_t ‖x_{t+1} − x_t‖²
  InequalityState realized;                   // the realized form, always claimed
  // A4 along the run: min over steps with ∇f(x_{t−τ_t}) ≠ 0 of ⟨∇f(x_{t−τ_t}), u_t⟩/‖∇f(x_{t−τ_t})‖² (the
  // largest ρ A4 allows; empty when every gradient was 0), and the number of those steps where ⟨∇f, u_t⟩ < 0:
  // the step climbs the stale gradient, and A4 fails there for every ρ ≥ 0. (⟨∇f, u_t⟩ = 0 is not counted: in
  // MPFR it also happens when a step too small for x_t's precision rounds to no step at all.)
  std::optional<reference::mpfr_real> min_alignment;
  long unaligned_steps = 0;
  long refused_steps = 0;  // Adam events the optimizer refused or skipped (overflow, zero gate under `skip`)
  long idle_steps = 0;     // constant-from-start: steps before the first arrival (no update at all)
};

// The integer maximizer of τ·σ(τ) over {0, …, tau_max} (the smallest one on ties), with core::sigma.
long integer_argmax_tau_sigma(const UpdateGate& gate, long tau_max);

// The objective and the starting point x_0 a run of `config` uses (drawn from the seed), so that a test can replay
// the run independently of this engine.
std::unique_ptr<Objective<reference::mpfr_real>> trajectory_objective(const TrajectoryConfig& config);
std::vector<reference::mpfr_real> trajectory_initial_point(const TrajectoryConfig& config);

// Refuses a configuration run_trajectory would refuse (InputError), without running it.
void validate_trajectory(const TrajectoryConfig& config);

// Validates the configuration (InputError) and runs it. `on_step` (optional) sees every T; `on_progress`
// (optional) is called with (steps done, total) every few hundred steps.
TrajectoryReport run_trajectory(const TrajectoryConfig& config,
                                const std::function<void(const TrajectoryPoint&)>& on_step = {},
                                const std::function<void(long, long)>& on_progress = {});

}  // namespace cgad::theory
