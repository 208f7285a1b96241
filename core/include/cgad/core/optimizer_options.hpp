#pragma once
// An outer optimizer and its hyperparameters as a user wrote them (the `cgad` command's --optimizer, --lr, ...;
// the Python package's keyword arguments), turned into an OptimizerConfig for any scalar type. Values stay text
// until the working precision is set, then are parsed exactly in the target format: 0.1 reaches an MPFR replay as
// 0.1, and the fast path as the float nearest to 0.1, each rounded once. Core's, so that the fast path's
// configuration (fastpath/options.hpp) is made without the reference or MPFR (docs/design.md §2).
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

// A hyperparameter parsed to Real, refusing a nonzero decimal that Real rounds to 0 (--lr 1e-50 in float): the user
// asked for a step, and lr = 0 (which is valid) would silently take none; for eps the range check after it would
// only say "got 0". The message quotes the text as written.
template <RealScalar Real>
Real parse_nonvanishing(const std::string& text, const char* name) {
  const Real x = parse_real<Real>(text, name);
  if (rounds_to_zero(text, x == 0)) {
    throw InputError(std::string(name) + " is not 0 as written, got '" + text + "', which rounds to 0 in " +
                     (std::same_as<Real, float>    ? "float (the fast path's format)"
                      : std::same_as<Real, double> ? "double"
                                                   : "this format"));
  }
  return x;
}

// The hyperparameters parsed to Real and the gate's α to Gate (OptimizerConfig). Where Gate is another format than
// Real (the fast path: float and double), α is read in Real too, so that the run refuses an α its hyperparameters'
// format cannot hold (past float's range), as it refuses any other such hyperparameter.
template <RealScalar Real, RealScalar Gate = Real>
OptimizerConfig<Real, Gate> optimizer_config(const OptimizerOptions& options) {
  OptimizerConfig<Real, Gate> config;
  config.optimizer = parse_optimizer(options.optimizer);
  // --lr means the Adam family's η or the Nesterov family's η, whichever the optimizer is; each keeps its
  // own default (1e-3 and 0.7) when it is not given.
  if (options.lr) {
    config.adam.lr = parse_nonvanishing<Real>(*options.lr, "lr");
    config.nesterov.lr = config.adam.lr;
  }
  if (options.beta1) config.adam.beta1 = parse_real<Real>(*options.beta1, "beta1");
  if (options.beta2) config.adam.beta2 = parse_real<Real>(*options.beta2, "beta2");
  if (options.eps) config.adam.eps = parse_nonvanishing<Real>(*options.eps, "eps");
  if (options.weight_decay) config.adam.weight_decay = parse_real<Real>(*options.weight_decay, "weight-decay");
  if (options.momentum) config.nesterov.momentum = parse_real<Real>(*options.momentum, "momentum");
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
  if (is_adam_family(config.optimizer)) {
    validate_range(config.adam);
  } else {
    validate_range(config.nesterov);
  }
  return config;
}

}  // namespace cgad::core
