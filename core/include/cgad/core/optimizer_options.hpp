#pragma once
// An outer optimizer and its hyperparameters as a user wrote them (the `cgad` command's --optimizer, --lr, ...;
// the Python package's keyword arguments), turned into an OptimizerConfig for any scalar type. Values stay text
// until the working precision is set, then are parsed exactly in the target format: 0.1 reaches an MPFR replay as
// 0.1, and the fast path as the float nearest to 0.1, each rounded once. Core's, so that the fast path's
// configuration (fastpath/options.hpp) is made without the reference or MPFR (docs/design.md §2).
#include "cgad/core/decimal_complement.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/optimizer_config.hpp"
#include "cgad/core/optimizer_kind.hpp"
#include "cgad/core/real_scalar.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace cgad::core {

struct OptimizerOptions {
  std::string optimizer = "cgad";
  std::optional<std::string> lr, beta1, beta2, eps, weight_decay, momentum;
  std::string alpha = "0.2";
  std::int64_t tau_cut = 32;
  std::int64_t buffer = 4;
  std::size_t fragments = 1;
  std::string on_zero_gate = "apply";
};

// The largest --tau-cut: 2^24, the largest integer up to which float holds every integer exactly.
inline constexpr std::int64_t kMaxTauCut = std::int64_t{1} << 24;

// Whether a number as written is not 0 (a nonzero digit before any exponent) while its value in some format,
// `parsed_to_zero`, is: "1e-50" in float, "1e-400" in double.
inline bool rounds_to_zero(const std::string& text, bool parsed_to_zero) {
  return parsed_to_zero && text.substr(0, text.find_first_of("eE")).find_first_of("123456789") != std::string::npos;
}

// The format a refusal names.
template <RealScalar Real>
constexpr const char* format_name() {
  return std::same_as<Real, float>    ? "float (the fast path's format)"
         : std::same_as<Real, double> ? "double"
                                      : "this format";
}

// A hyperparameter parsed to Real, refusing a nonzero decimal that Real rounds to 0 (--lr 1e-50 in float): the user
// asked for a step, and lr = 0 (which is valid) would silently take none; for eps the range check after it would
// only say "got 0". The message quotes the text as written.
template <RealScalar Real>
Real parse_nonvanishing(const std::string& text, const char* name) {
  const Real x = parse_real<Real>(text, name);
  if (rounds_to_zero(text, x == 0)) {
    throw InputError(std::string(name) + " is not 0 as written, got '" + text + "', which rounds to 0 in " +
                     format_name<Real>());
  }
  return x;
}

// How a run's step forms 1 − β (docs/design.md §5, "Derived constants and how each is rounded"): from the β it holds,
// 1 − RN(β) (the reference; bitsandbytes' 1.0f − β), or rounded once from the user's decimal (the fast path's cgad
// semantics, whose bias corrections also take β^t from the decimal).
enum class BetaComplement { of_rounded, of_decimal };

// The β rule, for β1, β2 and the Nesterov family's momentum, on the decimal as the user wrote it (docs/design.md §3):
// a decimal in [0, 1) whose 1 − β the arithmetic can represent -- 1 − β of the decimal rounds to a positive Real
// (of_decimal: 0.99999999 is taken in float, whose β is then 1.0f but whose 1 − β is 1e-8), or β itself rounds below
// 1 in Real (of_rounded: 1 − β would be 0 and the step degenerate). β rounded to Real; every refusal quotes the text.
template <RealScalar Real>
Real parse_beta(const std::string& text, const char* name, BetaComplement how) {
  const auto refuse = [&](const std::string& why) {
    throw InputError(std::string(name) + " must lie in [0, 1)" + why + ", got '" + text + "'");
  };
  std::string complement;
  try {
    complement = one_minus_decimal_text(text, name);
  } catch (const InputError&) {
    refuse("");
  }
  if (complement == "0") refuse("");
  const Real beta = parse_real<Real>(text, name);
  if (how == BetaComplement::of_decimal && parse_real<Real>(complement, name) == 0) {
    refuse(std::string(" and 1 - ") + name + " must not round to 0 in " + format_name<Real>() +
           " (the step multiplies by it)");
  }
  if (how == BetaComplement::of_rounded && !(beta < Real(1))) {
    refuse(std::string(" and round below 1 in ") + format_name<Real>() + ": this arithmetic forms 1 - " + name +
           " from the rounded value (the reference's 1 - beta, bitsandbytes' 1.0f - beta), which would be 0");
  }
  return beta;
}

// The hyperparameters parsed to Real and the gate's α to Gate (OptimizerConfig). Where Gate is another format than
// Real (the fast path: float and double), α is read in Real too, so that the run refuses an α its hyperparameters'
// format cannot hold (past float's range), as it refuses any other such hyperparameter.
// `how`: how the run's step forms 1 − β (BetaComplement); the fast path passes of_decimal (fastpath/options.hpp),
// whose cgad semantics it is, and refuses what bitsandbytes' semantics cannot represent in fastpath::validate.
template <RealScalar Real, RealScalar Gate = Real>
OptimizerConfig<Real, Gate> optimizer_config(const OptimizerOptions& options,
                                             BetaComplement how = BetaComplement::of_rounded) {
  OptimizerConfig<Real, Gate> config;
  config.optimizer = parse_optimizer(options.optimizer);
  // --lr means the Adam family's η or the Nesterov family's η, whichever the optimizer is; each keeps its
  // own default (1e-3 and 0.7) when it is not given.
  if (options.lr) {
    config.adam.lr = parse_nonvanishing<Real>(*options.lr, "lr");
    config.nesterov.lr = config.adam.lr;
  }
  if (options.beta1) config.adam.beta1 = parse_beta<Real>(*options.beta1, "beta1", how);
  if (options.beta2) config.adam.beta2 = parse_beta<Real>(*options.beta2, "beta2", how);
  if (options.eps) config.adam.eps = parse_nonvanishing<Real>(*options.eps, "eps");
  if (options.weight_decay) config.adam.weight_decay = parse_real<Real>(*options.weight_decay, "weight-decay");
  if (options.momentum) config.nesterov.momentum = parse_beta<Real>(*options.momentum, "momentum", how);
  if constexpr (!std::same_as<Real, Gate>) parse_real<Real>(options.alpha, "alpha");
  config.alpha = parse_real<Gate>(options.alpha, "alpha");
  // τ_cut up to 2^24, the largest integer below which float holds every integer exactly: a float run (this function
  // at Real = float) would otherwise hold 16777216 for 16777217 and skip τ = 16777216, which the reference
  // (τ < τ_cut) applies. Every backend takes the same range, so a command means the same gate whichever runs it.
  if (options.tau_cut < 1 || options.tau_cut > kMaxTauCut) {
    throw InputError(
        "tau-cut must be an integer in [1, 2^24 = 16777216] (the largest up to which a "
        "float holds every integer), got " +
        std::to_string(options.tau_cut));
  }
  config.tau_cut = Gate(options.tau_cut);
  config.buffer = options.buffer;
  config.fragments = options.fragments;
  if (options.on_zero_gate == "apply") {
    config.on_zero_gate = ZeroGatePolicy::apply;
  } else if (options.on_zero_gate == "skip") {
    config.on_zero_gate = ZeroGatePolicy::skip;
  } else {
    throw InputError("on-zero-gate must be apply or skip, got '" + options.on_zero_gate + "'");
  }
  // The ranges that keep a user's finite input finite (hyperparams.hpp, validate_range), for the optimizer run.
  // With of_decimal, 1 − β of the decimals (a β left at its default is its default's decimal, to_decimal).
  const auto one_minus = [&](const std::optional<std::string>& text, const Real& beta) -> std::optional<double> {
    if (how == BetaComplement::of_rounded) return std::nullopt;
    return one_minus_decimal<double>(text ? *text : to_decimal(beta), "beta");
  };
  if (is_adam_family(config.optimizer)) {
    const auto c1 = one_minus(options.beta1, config.adam.beta1), c2 = one_minus(options.beta2, config.adam.beta2);
    validate_range(config.adam, c1 ? std::optional(AdamComplements{*c1, *c2}) : std::nullopt);
  } else {
    validate_range(config.nesterov, one_minus(options.momentum, config.nesterov.momentum));
  }
  return config;
}

}  // namespace cgad::core
