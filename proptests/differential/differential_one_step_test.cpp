// Fast path vs the MPFR reference, one event on a fresh optimizer, for every configuration: parameters
// fp32/bf16 × state fp32/bf16/q8 (v's map dynamic or zero-free) × rounding nearest/stochastic × optimizer, over random
// sizes, values from subnormal to 1e30 with zeros and exact bf16 ties, staleness from 0 to far past τ_cut and random
// valid hyperparameters (differential_generators.hpp). Each stored value must lie within the bound derived in
// differential_bounds.hpp (the fp32 chain, by running error analysis with u = 2^-24 per operation and 2^-150
// per possibly-subnormal product) plus the store into its format: bf16 half a spacing (nearest) or one
// spacing (stochastic); q8 absmax × (half the local code gap, or the gap) + 2·2^-24·absmax. Both sides see
// the same float hyperparameters, so the fast path's roundings are the only difference. Elements whose bound
// reaches FLT_MAX (|σΔ| ≳ 2^64 makes g·g overflow fp32) are outside the fp32 domain: counted, not compared.
// The table printed at the end gives max and RMS error in units of each format (ulps, or code gaps × absmax)
// and the largest fraction of the bound used, with the worst element.
#include "support/differential_generators.hpp"
#include "support/differential_one_step.hpp"

#include "cgad/reference/real.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace cgad::proptests {
namespace {

using core::OptimizerKind;
using fastpath::ParamFormat;
using fastpath::Rounding;
using fastpath::StateFormat;
using fastpath::VMap;

// 128 bits: the reference's own error (≤ 2^-120 relative after the chain) is 2^96 times below fp32's u.
constexpr unsigned kReferenceBits = 128;

void check_every_format(OptimizerKind kind) {
  reference::set_working_precision_bits(kReferenceBits);
  OneStepSummary summary;
  const bool ok = rc::check("every format within its bound, " + std::string(core::to_string(kind)), [&] {
    const OneStepCase c = *gen_one_step_case();
    for (const ParamFormat params : {ParamFormat::fp32, ParamFormat::bf16}) {
      for (const StateFormat state : {StateFormat::fp32, StateFormat::bf16, StateFormat::q8}) {
        for (const Rounding rounding : {Rounding::nearest, Rounding::stochastic}) {
          for (const VMap v_map : {VMap::dynamic, VMap::zero_free}) {
            const bool has_v_map = state == StateFormat::q8 && core::is_adam_family(kind);
            if (v_map == VMap::zero_free && !has_v_map) continue;
            auto config = step_config(kind, c.hyper, params, state, rounding);
            config.v_map = v_map;
            const OneStepOutcome outcome = check_one_step(config, c.theta, c.grad, c.tau);
            if (!outcome.failure.empty()) {
              RC_FAIL(fastpath::testing::describe(config) + ": " + outcome.failure);
            }
            summary.add(fastpath::testing::describe(config), outcome);
          }
        }
      }
    }
  });
  EXPECT_TRUE(ok);
  summary.print();
}

TEST(DifferentialOneStep, Cgad) {
  check_every_format(OptimizerKind::cgad);
}
TEST(DifferentialOneStep, PaCgadOneFragment) {
  check_every_format(OptimizerKind::pa_cgad);
}
TEST(DifferentialOneStep, AdamDecay) {
  check_every_format(OptimizerKind::adam_decay);
}
TEST(DifferentialOneStep, Adam) {
  check_every_format(OptimizerKind::adam);
}
TEST(DifferentialOneStep, Nesterov) {
  check_every_format(OptimizerKind::nesterov);
}
TEST(DifferentialOneStep, Sdm) {
  check_every_format(OptimizerKind::sdm);
}

// Found by this suite: Adam-Decay's σ = e^{−ατ} is never 0, but the fast path used to decide "zero gate" on σ
// rounded to float, which is 0 for ατ > 150·ln 2 ≈ 104, and with `skip` dropped an event the reference applies
// (t stopped advancing, so every later bias correction differed). α = 0.2, τ = 600: σ = e^-120 ≈ 7.7e-53.
TEST(DifferentialOneStep, AdamDecaySkipAppliesAnEventWhoseSigmaUnderflowsFloat) {
  reference::set_working_precision_bits(kReferenceBits);
  fastpath::StepConfig config;
  config.optimizer = OptimizerKind::adam_decay;
  config.params = ParamFormat::fp32;
  config.on_zero_gate = core::ZeroGatePolicy::skip;
  const OneStepOutcome outcome = check_one_step(config, {1.0f, -2.0f}, {0.5f, 0.25f}, 600);
  EXPECT_EQ(outcome.failure, "");
}

}  // namespace
}  // namespace cgad::proptests
