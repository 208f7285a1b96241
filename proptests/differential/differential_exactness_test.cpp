// Exactness of the fast path's gate, compared as bit patterns (every configuration, random state reached by
// random events first, random hyperparameters and sizes from differential_generators.hpp):
//  - `skip`: an event at τ ≥ τ_cut (σ = 0 exactly for the cosine gate) leaves every byte of the parameters,
//    the state and the counters unchanged;
//  - `apply`: that event is exactly the pure-decay step, i.e. the same optimizer fed an all-zero
//    pseudo-gradient: every value bit for bit, except that a zero may differ in sign. σ·Δ is −0 for a negative
//    Δ, and β1·m + (1−β1)·(−0) is −0 where β1·m = −0 (β1 = 0 under a negative m, or m = −0), where the zero
//    gradient gives +0; a ±0 moment gives a ±0 Adam term and the same θ, so only the zero's sign can differ.
//    The property compares bits and accepts a difference only where both values are zeros;
//  - τ = 0 (σ(0) = 1 exactly): CGAD, PA-CGAD and Adam-Decay equal the fast path's own plain Adam bit for bit.
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"
#include "support/differential_generators.hpp"

#include <bit>
#include <sstream>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

using cgad::fastpath::detail::host_state_of;

namespace cgad::proptests {
namespace {

using core::OptimizerKind;
using fastpath::ParamFormat;
using fastpath::Rounding;
using fastpath::StateFormat;
using fastpath::testing::describe;
using fastpath::testing::Params;
using fastpath::testing::state_bytes;

std::vector<fastpath::StepConfig> every_format(OptimizerKind kind, const Hyper& h) {
  std::vector<fastpath::StepConfig> out;
  for (const ParamFormat params : {ParamFormat::fp32, ParamFormat::bf16}) {
    for (const StateFormat state : {StateFormat::fp32, StateFormat::bf16, StateFormat::q8}) {
      for (const Rounding rounding : {Rounding::nearest, Rounding::stochastic})
        out.push_back(step_config(kind, h, params, state, rounding));
      // bitsandbytes' semantics where bnb has a kernel (fp32 or q8 state, nearest rounding).
      if (state != StateFormat::bf16) {
        auto bnb = step_config(kind, h, params, state, Rounding::nearest);
        bnb.q8_semantics = fastpath::Q8Semantics::bnb;
        bnb.min_q8_size = 0;
        out.push_back(bnb);
      }
    }
  }
  return out;
}

std::vector<unsigned char> snapshot(const Params& params, const fastpath::CpuOptimizer& opt) {
  std::vector<unsigned char> out = params.bytes();
  const auto state = state_bytes(opt, /*with_sync=*/false);
  out.insert(out.end(), state.begin(), state.end());
  return out;
}

// Parameters and moments decoded to float (params, then m, v or b), for comparison up to the sign of zero.
std::vector<float> decoded(const Params& params, const fastpath::CpuOptimizer& opt) {
  std::vector<float> out = params.fp32;
  for (const auto h : params.bf16_values) out.push_back(fastpath::to_float(h));
  for (const auto& name : opt.buffer_names()) {
    std::vector<float> buffer(opt.parameters());
    opt.read_buffer(name, buffer);
    out.insert(out.end(), buffer.begin(), buffer.end());
  }
  return out;
}

// The step counters (not the synchronization rounds), byte for byte.
std::vector<unsigned char> counters_of(const fastpath::CpuOptimizer& opt) {
  std::vector<unsigned char> out;
  const auto& c = opt.raw_counters();
  for (const auto t : c.t) out.push_back(static_cast<unsigned char>(t));
  out.push_back(static_cast<unsigned char>(c.round));
  out.push_back(static_cast<unsigned char>(c.steps));
  return out;
}

// The q8 codes and the step counters, byte for byte.
std::vector<unsigned char> state_codes(const fastpath::CpuOptimizer& opt) {
  std::vector<unsigned char> out;
  for (const auto& codes : host_state_of(opt).codes) out.insert(out.end(), codes.begin(), codes.end());
  const auto counters = counters_of(opt);
  out.insert(out.end(), counters.begin(), counters.end());
  return out;
}

// Finite gradients of ordinary magnitude for the warm-up events (the state must be nonzero, not exotic).
rc::Gen<std::vector<std::vector<float>>> gen_warmup(std::size_t n) {
  const auto value =
      rc::gen::map(rc::gen::pair(rc::gen::inRange(-(1 << 20), 1 << 20), rc::gen::inRange(-20, 5)),
                   [](const std::pair<int, int>& p) { return std::ldexp(static_cast<float>(p.first), p.second - 20); });
  return rc::gen::container<std::vector<std::vector<float>>>(rc::gen::container<std::vector<float>>(n, value));
}

RC_GTEST_PROP(DifferentialExactness, GatePastCutoffSkipsEveryByteOrIsThePureDecayStep, ()) {
  const OneStepCase c = *gen_one_step_case();
  const Hyper& hyper = c.hyper;
  const std::size_t n = c.grad.size();
  const auto warmup = *gen_warmup(n);
  const std::int64_t tau = *rc::gen::inRange<std::int64_t>(hyper.tau_cut, 1'000'001);
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::pa_cgad}) {
    for (auto config : every_format(kind, hyper)) {
      fastpath::CpuOptimizer opt(config, n, 1), decay(config, n, 1);
      Params params(config, c.theta), decay_params(config, c.theta);
      for (std::size_t s = 0; s < warmup.size(); ++s) {
        params.step(opt, warmup[s], static_cast<std::int64_t>(s % 3));
        decay_params.step(decay, warmup[s], static_cast<std::int64_t>(s % 3));
      }
      const auto before = snapshot(params, opt);
      const fastpath::StepReport report = params.step(opt, c.grad, tau);
      RC_ASSERT(report.sigma == 0.0f);
      if (config.on_zero_gate == core::ZeroGatePolicy::skip) {
        RC_ASSERT(!report.applied);
        if (before != snapshot(params, opt)) RC_FAIL(describe(config) + ": a skipped event changed bytes");
        // ... but it synchronized its fragment (gated_adam.hpp): PA-CGAD records the round.
        if (kind == OptimizerKind::pa_cgad) RC_ASSERT(opt.raw_counters().last_sync[0] == 0);
      } else {
        decay_params.step(decay, std::vector<float>(n, 0.0f), 0);
        const auto expected = decoded(decay_params, decay), got = decoded(params, opt);
        for (std::size_t k = 0; k < expected.size(); ++k) {
          const bool same = std::bit_cast<std::uint32_t>(expected[k]) == std::bit_cast<std::uint32_t>(got[k]) ||
                            (expected[k] == 0.0f && got[k] == 0.0f);
          if (!same) {
            std::ostringstream os;
            os << describe(config) << ": the gated event (tau " << tau << ") is not the zero-gradient step at value "
               << k << " of " << expected.size() << " (params, m, v): " << std::hexfloat << got[k] << " vs "
               << expected[k];
            RC_FAIL(os.str());
          }
        }
        // Byte-equal codes too with cgad's semantics. bnb's m sign fix stores a −0 m (here from g = 0·Δ with Δ < 0,
        // where the zero-gradient step has +0) as another code than +0 — both decode to the same zero under a zero
        // absmax, and the values above already agree up to the sign of zero — so for bnb only the counters are
        // compared byte for byte.
        const bool bnb = config.q8_semantics == fastpath::Q8Semantics::bnb;
        if (bnb ? counters_of(decay) != counters_of(opt) : state_codes(decay) != state_codes(opt)) {
          RC_FAIL(describe(config) + ": q8 codes or counters differ");
        }
      }
    }
  }
}

RC_GTEST_PROP(DifferentialExactness, FreshEventsEqualPlainAdamBitForBit, ()) {
  const OneStepCase c = *gen_one_step_case();
  const Hyper& hyper = c.hyper;
  const std::size_t n = c.grad.size();
  const auto stream = *gen_warmup(n);
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::pa_cgad, OptimizerKind::adam_decay}) {
    for (auto config : every_format(kind, hyper)) {
      auto adam_config = config;
      adam_config.optimizer = OptimizerKind::adam;
      fastpath::CpuOptimizer gated(config, n, 1), adam(adam_config, n, 1);
      Params gated_params(config, c.theta), adam_params(config, c.theta);
      for (const auto& grad : stream) {
        gated_params.step(gated, grad, 0);
        adam_params.step(adam, grad, 0);
      }
      gated_params.step(gated, c.grad, 0);
      adam_params.step(adam, c.grad, 0);
      if (snapshot(gated_params, gated) != snapshot(adam_params, adam))
        RC_FAIL(describe(config) + " differs from adam at tau 0");
    }
  }
}

}  // namespace
}  // namespace cgad::proptests
