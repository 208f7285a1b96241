#pragma once
// The Adam family's constants derived from β1 and β2, computed once per configuration on the host and handed to both
// backends through the step schedule (step_schedule.hpp); docs/design.md §5, "Derived constants and how each is
// rounded", lists them all.
//   cgad semantics: 1 − β is the float nearest 1 − β of the decimal (beta_decimals, config.hpp), formed exactly from
//     its text (core/decimal_complement.hpp) -- the reference's value for the user's decimal, and torch.optim.Adam's
//     (which forms 1 − β in double and rounds it once). The bias corrections' base β is 1 − c as a double-double, c
//     the double nearest 1 − β of the decimal: hi + lo is within 2^-53·(1 − β) of the decimal's β.
//   bnb semantics: 1 − β as bitsandbytes' kernels form it, 1.0f − β from the float β (csrc/kernels.cu of
//     bitsandbytes 0.50.2, kOptimizer32bit2State and kOptimizerStatic8bit2StateBlockwise: `1.0f - beta1`), and the
//     bias corrections' powers of that float β (lo = 0).
#include "cgad/fastpath/config.hpp"

namespace cgad::fastpath {

struct BetaConstants {
  float one_minus_beta1 = 0, one_minus_beta2 = 0;
  double base1_hi = 0, base1_lo = 0, base2_hi = 0, base2_lo = 0;  // β1, β2 as the powers β^t take them
};

BetaConstants beta_constants(const StepConfig& config);

}  // namespace cgad::fastpath
