#include "optimizer_words.hpp"

namespace cgad::cli {

std::string optimizer_words(core::OptimizerKind kind) {
  switch (kind) {
    case core::OptimizerKind::cgad:
      return "CGAD";
    case core::OptimizerKind::pa_cgad:
      return "PA-CGAD";
    case core::OptimizerKind::adam_decay:
      return "Adam-Decay";
    case core::OptimizerKind::adam:
      return "Adam";
    case core::OptimizerKind::nesterov:
      return "Nesterov";
    case core::OptimizerKind::delayed_nesterov:
      return "Delayed Nesterov";
    case core::OptimizerKind::sdm:
      return "SDM";
  }
  return std::string(core::to_string(kind));
}

std::string zero_gate_words(core::ZeroGatePolicy policy) {
  return policy == core::ZeroGatePolicy::skip ? "σ = 0 events skipped" : "σ = 0 events applied";
}

}  // namespace cgad::cli
