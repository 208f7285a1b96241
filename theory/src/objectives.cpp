#include "cgad/theory/objectives.hpp"

namespace cgad::theory {

namespace {
constexpr ObjectiveKind kAll[] = {ObjectiveKind::geman_mcclure, ObjectiveKind::sine_ripple,
                                  ObjectiveKind::logcosh_ripple, ObjectiveKind::noisy_quadratic};
}

const char* to_string(ObjectiveKind kind) {
  switch (kind) {
    case ObjectiveKind::geman_mcclure:
      return "geman-mcclure";
    case ObjectiveKind::sine_ripple:
      return "sine-ripple";
    case ObjectiveKind::logcosh_ripple:
      return "logcosh-ripple";
    case ObjectiveKind::noisy_quadratic:
      return "noisy-quadratic";
  }
  return "?";
}

ObjectiveKind parse_objective_kind(std::string_view name) {
  for (ObjectiveKind kind : kAll) {
    if (name == to_string(kind)) return kind;
  }
  throw core::InputError("unknown objective '" + std::string(name) + "' (expected " + kObjectiveKindNames + ")");
}

}  // namespace cgad::theory
