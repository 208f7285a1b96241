#include "cgad/fastpath/config.hpp"

#include "cgad/core/decimal_complement.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/core/optimizer_options.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"

#include <bit>
#include <cstdint>
#include <string>

namespace cgad::fastpath {

namespace {

void require_decimal_of(const std::optional<std::string>& decimal, float value, const char* name) {
  if (!decimal) return;
  const float parsed = core::parse_real<float>(*decimal, name);
  if (std::bit_cast<std::uint32_t>(parsed) != std::bit_cast<std::uint32_t>(value)) {
    throw core::InputError(std::string(name) + "'s decimal '" + *decimal + "' reads as " + core::show(parsed) +
                           ", not the configuration's " + core::show(value));
  }
}

}  // namespace

void validate(const StepConfig& config) {
  using core::OptimizerKind;
  if (config.optimizer == OptimizerKind::delayed_nesterov) {
    throw core::InputError("the fast path does not implement delayed-nesterov (use the reference backend)");
  }
  if (config.fragments == 0) throw core::InputError("the number of fragments must be >= 1");
  if (config.fragments != 1 && config.optimizer != OptimizerKind::pa_cgad) {
    throw core::InputError("only pa-cgad takes fragments; " + std::string(core::to_string(config.optimizer)) + " got " +
                           std::to_string(config.fragments));
  }
  // The β rule on the decimals (core::parse_beta): cgad semantics forms 1 − β from the decimal (derived_constants.hpp),
  // so β = 1.0f is valid there while 1 − β of the decimal is a positive float; bnb semantics forms 1.0f − β, which
  // must not be 0. The Nesterov family multiplies by the float μ alone (element_update.hpp) and takes the cgad rule.
  const BetaDecimals decimals = beta_decimals(config);
  const bool bnb = config.q8_semantics == Q8Semantics::bnb && core::is_adam_family(config.optimizer);
  const auto how = bnb ? core::BetaComplement::of_rounded : core::BetaComplement::of_decimal;
  const auto one_minus = [&](const std::string& decimal, const char* name) {
    core::parse_beta<float>(decimal, name, how);
    return core::one_minus_decimal<double>(decimal, name);
  };
  if (core::is_adam_family(config.optimizer)) {
    const core::AdamComplements complements{one_minus(decimals.beta1, "beta1"), one_minus(decimals.beta2, "beta2")};
    core::validate(config.adam, bnb ? std::nullopt : std::optional(complements));
    core::validate(gate_params<double>(config));
  } else {
    core::validate(config.nesterov, one_minus(decimals.momentum, "momentum"));
  }
  if (config.optimizer == OptimizerKind::pa_cgad && static_cast<double>(config.fragments) - 1.0 >= config.tau_cut) {
    throw core::InputError(
        "pa-cgad needs at most tau_cut fragments (a fragment synchronized every P rounds "
        "has age P - 1, and an age >= tau_cut gates every event to 0); got P = " +
        std::to_string(config.fragments) + ", tau_cut = " + core::show(config.tau_cut));
  }
  if (config.optimizer == OptimizerKind::pa_cgad && !(config.tau_cut <= kMaxPaCgadTauCut)) {
    throw core::InputError(
        "the fast path's pa-cgad takes tau_cut <= 2^20 outer rounds (it tabulates sigma over "
        "the ages below tau_cut); got " +
        core::show(config.tau_cut));
  }
  if (config.q8_semantics == Q8Semantics::bnb) {
    if (!core::is_adam_family(config.optimizer)) {
      throw core::InputError("q8 semantics bnb is bitsandbytes' Adam; " +
                             std::string(core::to_string(config.optimizer)) + " keeps cgad's");
    }
    if (config.state == StateFormat::bf16) {
      throw core::InputError("q8 semantics bnb has no bf16 state (bitsandbytes keeps 8-bit or 32-bit state)");
    }
    if (config.rounding == Rounding::stochastic) {
      throw core::InputError(
          "q8 semantics bnb rounds to nearest only (bitsandbytes' Adam kernels have no "
          "stochastic rounding)");
    }
  }
  require_decimal_of(config.beta1_decimal, config.adam.beta1, "beta1");
  require_decimal_of(config.beta2_decimal, config.adam.beta2, "beta2");
  require_decimal_of(config.momentum_decimal, config.nesterov.momentum, "momentum");
  if (config.v_map == VMap::zero_free && (config.state != StateFormat::q8 || !core::is_adam_family(config.optimizer))) {
    throw core::InputError(
        "v map zero-free is a map of q8 second moments: it needs state q8 and an Adam-family "
        "optimizer (got state " +
        std::string(to_string(config.state)) + ", " + std::string(core::to_string(config.optimizer)) + ")");
  }
  if (config.q8_codes) {
    if (config.state != StateFormat::q8) {
      throw core::InputError("q8 maps are the codes of q8 state: they need state q8 (got state " +
                             std::string(to_string(config.state)) + ")");
    }
    validate_q8_codes(*config.q8_codes);
  }
}

BetaDecimals beta_decimals(const StepConfig& config) {
  return {config.beta1_decimal.value_or(core::to_decimal(config.adam.beta1)),
          config.beta2_decimal.value_or(core::to_decimal(config.adam.beta2)),
          config.momentum_decimal.value_or(core::to_decimal(config.nesterov.momentum))};
}

std::size_t effective_min_q8_size(const StepConfig& config) {
  if (config.min_q8_size) return *config.min_q8_size;
  return config.q8_semantics == Q8Semantics::bnb ? 4096 : 0;
}

std::string_view to_string(ParamFormat format) {
  return format == ParamFormat::fp32 ? "fp32" : "bf16";
}
std::string_view to_string(StateFormat format) {
  switch (format) {
    case StateFormat::fp32:
      return "fp32";
    case StateFormat::bf16:
      return "bf16";
    case StateFormat::q8:
      return "q8";
  }
  return "unknown";
}
std::string_view to_string(Rounding rounding) {
  return rounding == Rounding::nearest ? "nearest" : "stochastic";
}
std::string_view to_string(Q8Semantics semantics) {
  return semantics == Q8Semantics::cgad ? "cgad" : "bnb";
}
std::string_view to_string(VMap map) {
  return map == VMap::dynamic ? "dynamic" : "zero-free";
}

ParamFormat parse_param_format(std::string_view text) {
  if (text == "fp32") return ParamFormat::fp32;
  if (text == "bf16") return ParamFormat::bf16;
  throw core::InputError("unknown parameter format '" + std::string(text) + "' (expected fp32 or bf16)");
}
StateFormat parse_state_format(std::string_view text) {
  if (text == "fp32") return StateFormat::fp32;
  if (text == "bf16") return StateFormat::bf16;
  if (text == "q8") return StateFormat::q8;
  throw core::InputError("unknown state format '" + std::string(text) + "' (expected fp32, bf16 or q8)");
}
Rounding parse_rounding(std::string_view text) {
  if (text == "nearest") return Rounding::nearest;
  if (text == "stochastic") return Rounding::stochastic;
  throw core::InputError("unknown rounding '" + std::string(text) + "' (expected nearest or stochastic)");
}

Q8Semantics parse_q8_semantics(std::string_view text) {
  if (text == "cgad") return Q8Semantics::cgad;
  if (text == "bnb") return Q8Semantics::bnb;
  throw core::InputError("unknown q8 semantics '" + std::string(text) + "' (expected cgad or bnb)");
}

VMap parse_v_map(std::string_view text) {
  if (text == "dynamic") return VMap::dynamic;
  if (text == "zero-free") return VMap::zero_free;
  throw core::InputError("unknown v map '" + std::string(text) + "' (expected dynamic or zero-free)");
}

}  // namespace cgad::fastpath
