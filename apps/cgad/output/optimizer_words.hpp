#pragma once
// Optimizers as a figure's legend names them, in words ("Adam-Decay", "Delayed Nesterov"), not as the command line
// spells them: one spelling for every figure.
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/optimizer_kind.hpp"

#include <string>

namespace cgad::cli {

std::string optimizer_words(core::OptimizerKind kind);
std::string zero_gate_words(core::ZeroGatePolicy policy);  // "σ = 0 events applied" / "... skipped"

}  // namespace cgad::cli
