#pragma once
// Hyperparameters of every outer optimizer and their validation (docs/design.md §2, §3), declared here and defined
// once: the templates in detail/hyperparams_impl.hpp, adam_term_bound in core/src/hyperparams.cpp.
// The fast path and the theory read the same structs; defaults are parsed from decimal text so that
// an MPFR run sees 1e-3, not the double nearest to it.
#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/core/real_scalar.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace cgad::core {

// What an Adam-family step does when σ(τ) = 0: run the step on a zero gradient (the paper's one-line
// change: t advances, m and v decay, θ moves on its momentum), or drop the event entirely.
enum class ZeroGatePolicy { apply, skip };

template <RealScalar Real>
struct AdamHyper {
  Real lr = parse_real<Real>("1e-3", "lr");
  Real beta1 = parse_real<Real>("0.9", "beta1");
  Real beta2 = parse_real<Real>("0.999", "beta2");
  Real eps = parse_real<Real>("1e-8", "eps");
  Real weight_decay = Real(0);
};

// The DiLoCo outer recipe: lr 0.7, momentum 0.9 (Douillard et al. 2023, arXiv 2311.08105).
template <RealScalar Real>
struct NesterovHyper {
  Real lr = parse_real<Real>("0.7", "lr");
  Real momentum = parse_real<Real>("0.9", "momentum");
};

// InputError naming `name` unless x is finite and in [0, 1), > 0, or ≥ 0 respectively.
template <RealScalar Real>
void require_unit_interval(const Real& x, const std::string& name);
template <RealScalar Real>
void require_positive(const Real& x, const std::string& name);
template <RealScalar Real>
void require_nonnegative(const Real& x, const std::string& name);

// 1 − β as a run forms it from the user's decimal rather than from the β it holds: the fast path's cgad semantics
// (docs/design.md §5, "Derived constants and how each is rounded"), whose float β may be 1 (0.99999999 rounds to
// 1.0f) while 1 − β of the decimal is a positive float. Doubles of 1 − β of the decimal (one_minus_decimal); the
// β rule (parse_beta, optimizer_options.hpp) checked the decimal before. Absent, 1 − β is that of the β held, which
// must then be < 1.
struct AdamComplements {
  double beta1, beta2;
};

// lr >= 0, as torch.optim, bitsandbytes and torchao take it: a schedule may reach 0 (warmup from 0, LinearLR to
// 0), and a step at lr = 0 leaves θ where it is while t and the buffers advance (docs/design.md §3). β in [0, 1), or
// in [0, 1] with 1 − β > 0 where 1 − β comes from the decimal (the complements above).
template <RealScalar Real>
void validate(const AdamHyper<Real>& h, const std::optional<AdamComplements>& from_decimal = std::nullopt);
template <RealScalar Real>
void validate(const NesterovHyper<Real>& h, std::optional<double> one_minus_momentum = std::nullopt);

// Upper limits that keep finite input finite, for the commands that take hyperparameters from a user (`cgad
// replay`, `cgad noise`, the Python package; fastpath::validate and the libraries take any finite value, so that a
// study may run an optimizer into divergence on purpose and report it). What they rest on: every applied event has
// |σ·Δ| < 2^63 (the overflow rule, overflow_rule.hpp: gated_adam.hpp, nesterov.hpp, the fast path alike), and a state
// a step can reach is finite (a state file that holds another is refused). A step may move θ by at most 2^126: from
// any |θ| < 2^127 the result stays below 2^128, float's overflow threshold.
//   - Nesterov family: |b| < 2^63/(1 − μ) ≤ 2^87 where μ ≤ 1 − 2^-24 (the largest float below 1); so
//     |Δ + μ·b| < 2^88, and η ≤ 2^38 makes one step move θ by less than 2^126. (η = 3e38 gave -Inf on the first
//     event.) A decimal μ closer to 1 (0.999999999, whose float is 1: b then sums the d until they fall below half
//     its spacing, |b| ≤ 2^88 ≤ 2^63/(1 − μ)) also needs η·2^63·(1 + 1/(1 − μ)) ≤ 2^126, 1 − μ of the decimal; for
//     every μ ≤ 1 − 2^-24 η ≤ 2^38 implies it.
//   - Adam family: a step moves θ by η·(A + λ|θ|), A = |m̂|/(√v̂ + ε) (adam_term_bound below). Decoupled decay
//     multiplies θ by 1 − ηλ per step: ηλ ≤ 2 keeps |1 − ηλ| ≤ 1, so the decay never amplifies θ (λ = 1e30 at the
//     default η = 1e-3 sent θ to ±Inf within two steps), and λ ≤ 2^63 keeps the product λ·θ finite for every
//     |θ| < 2^65. η·A ≤ 2^126 is required of the bound on A, and so is A/√(1 − β2) ≤ 2^126: bitsandbytes' order
//     (fastpath/detail/element_update.hpp) forms m/(√v + c2·ε) = A·c1/c2 first, and c1/c2 ≤ 1/√(1 − β2).
// Not covered, and documented as such: a run that accumulates past 2^127 over very many steps, and a state that
// rounds v to 0 under a nonzero m (bitsandbytes' 8-bit zero code, which has no guard; v below float's smallest
// subnormal), where only A < 2^63/ε holds whatever the betas.
inline constexpr double kMaxLearningRate = 0x1p38;  // 274877906944
inline constexpr double kMaxWeightDecay = 0x1p63;
inline constexpr double kMaxDecayPerStep = 2;    // η·λ
inline constexpr double kMaxStepMove = 0x1p126;  // the most one step may move θ by

// A bound on the Adam term A = |m̂|/(√v̂ + ε) over every step count t and every gradient sequence with |g| < 2^63,
// in exact arithmetic, from (β1, β2, ε) as doubles. Always A < 2^63/ε (m̂ is a weighted mean of the g, √v̂ ≥ 0).
// With β1² < β2, also A ≤ K = (1 − β1)/√((1 − β2)(1 − β1²/β2)) whatever ε: with m_t = (1 − β1)Σ_k β1^(t−k) g_k,
// v_t = (1 − β2)Σ_k β2^(t−k) g_k² and ρ = β1²/β2, Cauchy–Schwarz gives |m_t| ≤ (1 − β1)·√(Σ_{j<t} ρ^j)·√(v_t/(1 − β2)),
// and after the bias corrections the t-dependent factor √((1 − β2^t)(1 − ρ^t))/(1 − β1^t) is ≤ 1 (AM–GM:
// (1 − a)(1 − b) ≤ (1 − √(ab))² with a = β2^t, b = ρ^t, √(ab) = β1^t). K = 7.27 at the defaults. With β1² ≥ β2
// nothing but ε bounds A: one gradient and then zeros make A grow like (β1/√β2)^t (like √t at β1² = β2) until
// √v̂ falls below ε.
double adam_term_bound(double beta1, double beta2, double eps);

// InputError unless validate() holds and the hyperparameters are within the limits above (the Adam family's through
// adam_term_bound).
// With 1 − β from the decimals (AdamComplements), the bound is taken at the β of those complements.
template <RealScalar Real>
void validate_range(const AdamHyper<Real>& h, const std::optional<AdamComplements>& from_decimal = std::nullopt);
template <RealScalar Real>
void validate_range(const NesterovHyper<Real>& h, std::optional<double> one_minus_momentum = std::nullopt);

// The functions above for one scalar type, as explicit instantiations: declared `extern` here for the hardware types
// (and in reference/real.hpp for mpfr_real), defined in the libraries that compile them (core/src/hyperparams.cpp,
// reference/src/core_instances.cpp) from detail/hyperparams_impl.hpp, so that no user's translation unit compiles
// the validation's arithmetic under its own flags (docs/design.md §2, "Which flags are usage requirements").
#define CGAD_CORE_HYPERPARAMS_INSTANCES(EXTERN, Real)                                                       \
  EXTERN template void require_unit_interval<Real>(const Real&, const std::string&);                        \
  EXTERN template void require_positive<Real>(const Real&, const std::string&);                             \
  EXTERN template void require_nonnegative<Real>(const Real&, const std::string&);                          \
  EXTERN template void validate<Real>(const AdamHyper<Real>&, const std::optional<AdamComplements>&);       \
  EXTERN template void validate<Real>(const NesterovHyper<Real>&, std::optional<double>);                   \
  EXTERN template void validate_range<Real>(const AdamHyper<Real>&, const std::optional<AdamComplements>&); \
  EXTERN template void validate_range<Real>(const NesterovHyper<Real>&, std::optional<double>);
CGAD_CORE_FOR_HARDWARE_SCALARS(CGAD_CORE_HYPERPARAMS_INSTANCES, extern)

}  // namespace cgad::core
