#pragma once
// Shared by the trajectory tests of the ideal and the real update: every objective, delay schedule and gate they
// sweep, and a gate built from decimal text (parsed at the working precision, as the CLI does).
#include "cgad/core/gate.hpp"
#include "cgad/reference/real.hpp"
#include "cgad/theory/trajectory.hpp"

#include <vector>

namespace cgad::theory_test {

inline const std::vector<theory::ObjectiveKind> kObjectives{
    theory::ObjectiveKind::geman_mcclure, theory::ObjectiveKind::sine_ripple, theory::ObjectiveKind::logcosh_ripple,
    theory::ObjectiveKind::noisy_quadratic};
inline const std::vector<theory::DelayKind> kDelays{
    theory::DelayKind::constant,   theory::DelayKind::uniform,
    theory::DelayKind::geometric,  theory::DelayKind::pareto,
    theory::DelayKind::bursty,     theory::DelayKind::adversarial,
    theory::DelayKind::heavy_tail, theory::DelayKind::constant_from_start};
inline const std::vector<core::GateKind> kGates{core::GateKind::cosine, core::GateKind::exponential,
                                                core::GateKind::none};

inline theory::UpdateGate gate(core::GateKind kind, const char* alpha = "0.2", long cut = 32) {
  return {kind, core::parse_real<reference::mpfr_real>(alpha, "alpha"), reference::mpfr_real(cut)};
}

}  // namespace cgad::theory_test
