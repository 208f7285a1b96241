#pragma once
// The ideal gated update of DESIGN.md §6, run in MPFR, with the summed inequality checked at every T.
//
//   x_{t+1} = x_t − η·σ(τ_t)·u_t,   u_t = clip_G(D_t ∘ ∇f(x_{t−τ_t})),   D_t = diag(1 + s·ζ_{t,i}), ζ ~ U[−1, 1]
//
// s ∈ [0, 1) is the multiplicative gradient-noise level (0 for the deterministic objectives, ½ by default for
// the noisy quadratic). Without clipping ⟨∇f, u⟩ ≥ (1 − s)‖∇f‖², so the alignment constant is ρ = 1 − s, and
// ‖u‖ ≤ (1 + s)‖∇f‖. G = (1 + s)·sup‖∇f‖ where the objective has a gradient bound (clipping never acts);
// for the quadratic G = (1 + s)·‖∇f(x_0)‖ and the clip enforces ‖u‖ ≤ G, possibly at the cost of alignment,
// which the run then checks step by step. τ_t = min(schedule, t): no update reads an iterate before x_0.
//
// Two forms of the inequality are checked after every step T (theory/README.md §3):
//  * descent form (needs only L-smoothness and ‖u_t‖ ≤ G, always claimed):
//      Σ_{t<T} σ_t⟨∇f(x_{t−τ_t}), u_t⟩ ≤ (f(x_0) − f(x_T))/η + LηG²·Σ_{t<T}(σ_tτ_t + σ_t²/2)
//  * DESIGN.md §6 form (claimed while ⟨∇f(x_{t−τ_t}), u_t⟩ ≥ ρ‖∇f(x_{t−τ_t})‖² has held at every step):
//      ρ·Σ_{t<T} σ_t‖∇f(x_{t−τ_t})‖² ≤ (f(x_0) − f*)/η + LηG²·Σ_{t<T}(σ_tτ_t + σ_t²/2)
#include "cgad/reference/gate.hpp"
#include "cgad/reference/real.hpp"
#include "cgad/theory/delays.hpp"
#include "cgad/theory/objectives.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace cgad::theory {

// Which σ the update applies: CGAD (cosine gate), Adam-Decay (e^{−ατ}), or ungated (σ ≡ 1).
using UpdateGate = reference::GateParams<reference::mpfr_real>;

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
  UpdateGate gate{reference::GateKind::cosine, reference::mpfr_real("0.2"), reference::mpfr_real(32)};
  reference::mpfr_real eta{"0.05"};
  std::optional<double> noise;  // s; empty: the objective's default
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
  reference::mpfr_real bias;  // Σ_{t<T} σ_tτ_t / T
};

struct TrajectoryReport {
  reference::mpfr_real L, f_star, G, rho, eta, noise, f0, f_final;
  long steps = 0;
  long realized_tau_max = 0;
  long adversarial_tau = 0;          // the integer argmax of τσ(τ) over {0..τ_max} for this gate
  reference::mpfr_real sum_sigma_tau{0}, sum_sigma_squared{0};
  reference::mpfr_real bias{0};      // Σσ_tτ_t / T
  InequalityState descent, design;
  std::optional<long> alignment_failure;  // first step t where ⟨∇f, u⟩ < ρ‖∇f‖² (clipping); design form
                                          // is not claimed from then on
  long clipped_steps = 0;
};

// The integer maximizer of τ·σ(τ) over {0, …, tau_max} (the smallest one on ties), with reference::sigma.
long integer_argmax_tau_sigma(const UpdateGate& gate, long tau_max);

// Validates the configuration (InputError) and runs it. `on_step` (optional) sees every T; `on_progress`
// (optional) is called with (steps done, total) every few hundred steps.
TrajectoryReport run_trajectory(const TrajectoryConfig& config,
                                const std::function<void(const TrajectoryPoint&)>& on_step = {},
                                const std::function<void(long, long)>& on_progress = {});

}  // namespace cgad::theory
