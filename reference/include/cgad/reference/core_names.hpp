#pragma once
// The reference builds on core (docs/design.md §2): the names its templates use unqualified, also reachable as
// reference::X for code written before they moved to core.
#include "cgad/core/errors.hpp"
#include "cgad/core/fragments.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/optimizer_config.hpp"
#include "cgad/core/optimizer_kind.hpp"
#include "cgad/core/overflow_rule.hpp"
#include "cgad/core/real_scalar.hpp"
#include "cgad/core/step_report.hpp"

namespace cgad::reference {

using core::AdamHyper;
using core::FragmentLayout;
using core::gamma;
using core::gate_of;
using core::GateKind;
using core::GateParams;
using core::InputError;
using core::is_adam_family;
using core::is_finite;
using core::kRefusedGradientExponent;
using core::NesterovHyper;
using core::OptimizerConfig;
using core::OptimizerKind;
using core::parse_real;
using core::RealScalar;
using core::show;
using core::sigma;
using core::SkipReason;
using core::StateCounter;
using core::StepReport;
using core::to_decimal;
using core::to_string;
using core::validate;
using core::validate_range;
using core::ZeroGatePolicy;

}  // namespace cgad::reference
