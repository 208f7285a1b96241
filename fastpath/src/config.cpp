#include "cgad/fastpath/config.hpp"

#include "cgad/reference/errors.hpp"
#include "cgad/reference/gate.hpp"

#include <string>

namespace cgad::fastpath {

void validate(const StepConfig& config) {
  using reference::OptimizerKind;
  if (config.optimizer == OptimizerKind::delayed_nesterov) {
    throw reference::InputError("the fast path does not implement delayed-nesterov (use the reference backend)");
  }
  if (config.fragments == 0) throw reference::InputError("the number of fragments must be >= 1");
  if (config.fragments != 1 && config.optimizer != OptimizerKind::pa_cgad) {
    throw reference::InputError("only pa-cgad takes fragments; " + std::string(reference::to_string(config.optimizer)) +
                                " got " + std::to_string(config.fragments));
  }
  if (reference::is_adam_family(config.optimizer)) {
    reference::validate(config.adam);
    reference::validate(gate_params<float>(config));
  } else {
    reference::validate(config.nesterov);
  }
}

std::string_view to_string(ParamFormat format) { return format == ParamFormat::fp32 ? "fp32" : "bf16"; }
std::string_view to_string(StateFormat format) {
  switch (format) {
    case StateFormat::fp32: return "fp32";
    case StateFormat::bf16: return "bf16";
    case StateFormat::q8: return "q8";
  }
  return "unknown";
}
std::string_view to_string(Rounding rounding) { return rounding == Rounding::nearest ? "nearest" : "stochastic"; }

ParamFormat parse_param_format(std::string_view text) {
  if (text == "fp32") return ParamFormat::fp32;
  if (text == "bf16") return ParamFormat::bf16;
  throw reference::InputError("unknown parameter format '" + std::string(text) + "' (expected fp32 or bf16)");
}
StateFormat parse_state_format(std::string_view text) {
  if (text == "fp32") return StateFormat::fp32;
  if (text == "bf16") return StateFormat::bf16;
  if (text == "q8") return StateFormat::q8;
  throw reference::InputError("unknown state format '" + std::string(text) + "' (expected fp32, bf16 or q8)");
}
Rounding parse_rounding(std::string_view text) {
  if (text == "nearest") return Rounding::nearest;
  if (text == "stochastic") return Rounding::stochastic;
  throw reference::InputError("unknown rounding '" + std::string(text) + "' (expected nearest or stochastic)");
}

}  // namespace cgad::fastpath
