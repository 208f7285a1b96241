#pragma once
// The seven outer optimizers by name (docs/design.md §3), for every part: the reference builds them
// (reference/optimizers.hpp), the fast path runs the six it has (fastpath/config.hpp), the commands parse them.
#include "cgad/core/errors.hpp"

#include <array>
#include <string>
#include <string_view>
#include <utility>

namespace cgad::core {

enum class OptimizerKind { cgad, pa_cgad, adam_decay, adam, nesterov, delayed_nesterov, sdm };

inline constexpr std::array<std::pair<std::string_view, OptimizerKind>, 7> kOptimizerNames{{
    {"cgad", OptimizerKind::cgad},
    {"pa-cgad", OptimizerKind::pa_cgad},
    {"adam-decay", OptimizerKind::adam_decay},
    {"adam", OptimizerKind::adam},
    {"nesterov", OptimizerKind::nesterov},
    {"delayed-nesterov", OptimizerKind::delayed_nesterov},
    {"sdm", OptimizerKind::sdm},
}};

inline std::string_view to_string(OptimizerKind kind) {
  for (const auto& [name, k] : kOptimizerNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

inline OptimizerKind parse_optimizer(std::string_view name) {
  for (const auto& [text, kind] : kOptimizerNames) {
    if (text == name) return kind;
  }
  throw InputError("unknown optimizer '" + std::string(name) +
                   "' (expected cgad, pa-cgad, adam-decay, adam, nesterov, delayed-nesterov or sdm)");
}

inline bool is_adam_family(OptimizerKind kind) {
  return kind == OptimizerKind::cgad || kind == OptimizerKind::pa_cgad || kind == OptimizerKind::adam_decay ||
         kind == OptimizerKind::adam;
}

}  // namespace cgad::core
