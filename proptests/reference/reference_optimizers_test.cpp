// Identities between the reference optimizers (docs/design.md §3), each checked exactly — equal MPFR values, or
// equal bit patterns in float/double — over generated streams.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "support/reference_streams.hpp"

#include "cgad/reference/optimizers.hpp"

#include <cstring>

namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
using cgad::proptests::gen_stream;
using cgad::proptests::Stream;
using cgad::proptests::to_real;
using core::OptimizerKind;
using ref::mpfr_real;

class OptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override { ref::set_working_precision_bits(256); }
};

template <class Real>
struct Run {
  std::vector<Real> params;
  std::vector<std::vector<Real>> buffers;
  std::vector<core::StateCounter> counters;
  std::vector<core::StepReport<Real>> reports;
};

// Replays `stream` through a fresh optimizer, one outer round per event.
template <class Real>
Run<Real> replay(const core::OptimizerConfig<Real>& config, const Stream& stream) {
  Run<Real> run;
  run.params = to_real<Real>(stream.params);
  auto optimizer = ref::make_optimizer(config, run.params.size());
  for (const auto& step : stream.steps) {
    const std::vector<Real> grad = to_real<Real>(step.grad);
    run.reports.push_back(optimizer->apply(run.params, {grad, step.tau, 0}));
    optimizer->advance_round();
  }
  for (const auto& b : optimizer->buffers()) run.buffers.emplace_back(b.values.begin(), b.values.end());
  run.counters = optimizer->counters();
  return run;
}

template <class Real>
bool same_bits(const std::vector<Real>& a, const std::vector<Real>& b) {
  if constexpr (std::is_same_v<Real, mpfr_real>) {
    return a == b;
  } else {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Real)) == 0;
  }
}

template <class Real>
core::OptimizerConfig<Real> config_of(OptimizerKind kind) {
  core::OptimizerConfig<Real> config;
  config.optimizer = kind;
  return config;
}

template <class Real>
void check_cgad_at_zero_staleness_is_adam(Stream stream) {
  for (auto& step : stream.steps) step.tau = 0;
  const auto cgad = replay(config_of<Real>(OptimizerKind::cgad), stream);
  const auto adam = replay(config_of<Real>(OptimizerKind::adam), stream);
  RC_ASSERT(same_bits(cgad.params, adam.params));
  RC_ASSERT(same_bits(cgad.buffers[0], adam.buffers[0]));
  RC_ASSERT(same_bits(cgad.buffers[1], adam.buffers[1]));
}

RC_GTEST_FIXTURE_PROP(OptimizerTest, CgadAtZeroStalenessIsAdamBitForBit, ()) {
  const Stream stream = *gen_stream(0);
  check_cgad_at_zero_staleness_is_adam<mpfr_real>(stream);
  check_cgad_at_zero_staleness_is_adam<double>(stream);
  check_cgad_at_zero_staleness_is_adam<float>(stream);
}

// As τ_cut → ∞, γ(τ) = sin²(π(τ_cut−τ)/(2τ_cut)) → 1 with 1 − γ ≤ (πτ/(2τ_cut))², so CGAD tends to Adam-Decay.
// The parameter gap must shrink with τ_cut — by about 4× per doubling; we ask for 2× to stay clear of
// step-to-step noise — and be below 2^-200 relative to lr·steps once τ_cut = 2^120.
RC_GTEST_FIXTURE_PROP(OptimizerTest, AdamDecayIsTheLimitOfCgadAsTauCutGrows, ()) {
  const Stream stream = *gen_stream(16);
  const auto decay = replay(config_of<mpfr_real>(OptimizerKind::adam_decay), stream);
  auto gap_at = [&](const mpfr_real& tau_cut) {
    auto config = config_of<mpfr_real>(OptimizerKind::cgad);
    config.tau_cut = tau_cut;
    const auto cgad = replay(config, stream);
    mpfr_real gap(0);
    for (std::size_t i = 0; i < cgad.params.size(); ++i)
      gap = std::max(gap, mpfr_real(abs(cgad.params[i] - decay.params[i])));
    return gap;
  };
  const mpfr_real g1 = gap_at(mpfr_real(1 << 10));
  const mpfr_real g2 = gap_at(mpfr_real(1 << 11));
  const mpfr_real far = gap_at(ldexp(mpfr_real(1), 120));
  const mpfr_real scale = mpfr_real(stream.steps.size()) / 1000;  // lr · steps bounds the total movement
  RC_ASSERT(g2 <= g1 / 2 || g1 <= ldexp(scale, -240));
  RC_ASSERT(far <= ldexp(scale, -200));
}

// PA-CGAD with P fragments equals CGAD on the whole vector when no fragment's age exceeds the staleness: the
// caller advances the round once per pseudo-gradient, and each round every fragment's slice arrives with the
// same τ ≥ 1, so each a_f = 1 ≤ τ and every fragment sees σ(τ) and the same step count.
RC_GTEST_FIXTURE_PROP(OptimizerTest, PaCgadEqualsCgadWhenAgesDoNotExceedStaleness, ()) {
  Stream stream = *gen_stream(40, 12);
  for (auto& step : stream.steps) step.tau = std::max<std::int64_t>(step.tau, 1);
  const std::size_t n = stream.params.size();
  const std::size_t fragments = *rc::gen::inRange<std::size_t>(1, n + 1);
  const auto cgad = replay(config_of<mpfr_real>(OptimizerKind::cgad), stream);

  auto config = config_of<mpfr_real>(OptimizerKind::pa_cgad);
  config.fragments = fragments;
  std::vector<mpfr_real> params = to_real<mpfr_real>(stream.params);
  auto pa = ref::make_optimizer(config, n);
  const core::FragmentLayout& layout = pa->layout();
  for (const auto& step : stream.steps) {
    const std::vector<mpfr_real> grad = to_real<mpfr_real>(step.grad);
    for (std::size_t f = 0; f < fragments; ++f) {
      const std::span<const mpfr_real> slice(grad.data() + layout.offset(f), layout.size(f));
      const auto report = pa->apply(params, {slice, step.tau, f});
      RC_ASSERT(report.tau_effective == step.tau);
    }
    pa->advance_round();
  }
  RC_ASSERT(params == cgad.params);
}

// The converse, so the property above cannot pass vacuously: a fragment synchronized every round has age 0
// (P = 1 would be exactly CGAD), one left alone for k rounds is gated by its age σ(max(τ, a_f)) = σ(k), and
// its age restarts from 0 when it is synchronized.
TEST_F(OptimizerTest, PaCgadGatesAStaleFragmentByItsAge) {
  auto config = config_of<mpfr_real>(OptimizerKind::pa_cgad);
  config.fragments = 2;
  auto pa = ref::make_optimizer(config, 4);
  std::vector<mpfr_real> params(4, mpfr_real(1));
  const std::vector<mpfr_real> grad(2, mpfr_real(1));
  for (int round = 0; round < 5; ++round) {
    EXPECT_EQ(pa->apply(params, {grad, 0, 0}).tau_effective, 0);
    pa->advance_round();
  }
  EXPECT_EQ(pa->counters()[1].values, (std::vector<std::int64_t>{0, 5}));  // fragment 1 missed 5 rounds
  const auto report = pa->apply(params, {grad, 2, 1});
  EXPECT_EQ(report.tau_effective, 5);
  EXPECT_EQ(report.sigma, core::sigma(mpfr_real(5), core::gate_of(config)));
  EXPECT_EQ(pa->counters()[1].values, (std::vector<std::int64_t>{0, 0}));  // ages after the synchronization
  EXPECT_EQ(pa->counters()[0].values, (std::vector<std::int64_t>{5, 1}));  // per-fragment step counts
}

// The freeze the old age rule had: with `skip`, a fragment left alone for τ_cut rounds gets a zero gate. Its
// event is skipped, but the fragment was synchronized all the same, so its age restarts and its next event,
// a round later, is applied — where keeping the age would have skipped every later event of it forever.
TEST_F(OptimizerTest, PaCgadSkipDoesNotFreezeAFragment) {
  auto config = config_of<mpfr_real>(OptimizerKind::pa_cgad);
  config.fragments = 2;
  config.tau_cut = mpfr_real(4);
  config.on_zero_gate = core::ZeroGatePolicy::skip;
  auto pa = ref::make_optimizer(config, 4);
  std::vector<mpfr_real> params(4, mpfr_real(1));
  const std::vector<mpfr_real> grad(2, mpfr_real(1));
  for (int round = 0; round < 4; ++round) pa->advance_round();
  const auto skipped = pa->apply(params, {grad, 0, 1});
  EXPECT_FALSE(skipped.applied);
  EXPECT_EQ(skipped.reason, core::SkipReason::zero_gate);
  EXPECT_EQ(skipped.tau_effective, 4);
  EXPECT_EQ(params, std::vector<mpfr_real>(4, mpfr_real(1)));
  pa->advance_round();
  const auto applied = pa->apply(params, {grad, 0, 1});
  EXPECT_TRUE(applied.applied);
  EXPECT_EQ(applied.tau_effective, 0);
  EXPECT_NE(params[2], mpfr_real(1));
}

// P fragments synchronized round-robin reach age P − 1; the gate is exactly 0 from τ_cut on, so P = τ_cut is
// the largest P whose schedule alone never zeroes a gate, and P = τ_cut + 1 is refused.
TEST_F(OptimizerTest, PaCgadRefusesMoreFragmentsThanTauCut) {
  auto config = config_of<mpfr_real>(OptimizerKind::pa_cgad);
  config.tau_cut = mpfr_real(4);
  config.fragments = 4;
  EXPECT_NO_THROW(ref::make_optimizer(config, 8));
  config.fragments = 5;
  EXPECT_THROW(ref::make_optimizer(config, 8), core::InputError);
}

template <class Real>
void check_delayed_nesterov_one_is_nesterov(const Stream& stream) {
  auto delayed = config_of<Real>(OptimizerKind::delayed_nesterov);
  delayed.buffer = 1;
  const auto a = replay(delayed, stream);
  const auto b = replay(config_of<Real>(OptimizerKind::nesterov), stream);
  RC_ASSERT(same_bits(a.params, b.params));
  RC_ASSERT(same_bits(a.buffers[0], b.buffers[0]));
}

RC_GTEST_FIXTURE_PROP(OptimizerTest, DelayedNesterovWithBufferOneIsNesterov, ()) {
  const Stream stream = *gen_stream(40);
  check_delayed_nesterov_one_is_nesterov<mpfr_real>(stream);
  check_delayed_nesterov_one_is_nesterov<double>(stream);
  check_delayed_nesterov_one_is_nesterov<float>(stream);
}

RC_GTEST_FIXTURE_PROP(OptimizerTest, SdmAtZeroStalenessIsNesterov, ()) {
  Stream stream = *gen_stream(0);
  const auto a = replay(config_of<double>(OptimizerKind::sdm), stream);
  const auto b = replay(config_of<double>(OptimizerKind::nesterov), stream);
  RC_ASSERT(same_bits(a.params, b.params));
}

// Everything an optimizer and its caller hold, to compare byte for byte.
template <class Real>
struct Snapshot {
  std::vector<Real> params;
  std::vector<std::vector<Real>> buffers;
  std::vector<core::StateCounter> counters;
};

template <class Real>
Snapshot<Real> snapshot(const ref::OuterOptimizer<Real>& optimizer, const std::vector<Real>& params) {
  Snapshot<Real> out{params, {}, optimizer.counters()};
  for (const auto& b : optimizer.buffers()) out.buffers.emplace_back(b.values.begin(), b.values.end());
  return out;
}

template <class Real>
bool identical(const Snapshot<Real>& a, const Snapshot<Real>& b) {
  if (!same_bits(a.params, b.params) || a.buffers.size() != b.buffers.size()) return false;
  for (std::size_t i = 0; i < a.buffers.size(); ++i) {
    if (!same_bits(a.buffers[i], b.buffers[i])) return false;
  }
  for (std::size_t i = 0; i < a.counters.size(); ++i) {
    if (a.counters[i].values != b.counters[i].values) return false;
  }
  return true;
}

// Runs `stream` through a fresh optimizer, then applies `last` and returns its report, with the state just
// before and just after it.
template <class Real>
std::tuple<core::StepReport<Real>, Snapshot<Real>, Snapshot<Real>> apply_last(const core::OptimizerConfig<Real>& config,
                                                                              const Stream& stream,
                                                                              const std::vector<double>& last,
                                                                              std::int64_t tau) {
  std::vector<Real> params = to_real<Real>(stream.params);
  auto optimizer = ref::make_optimizer(config, params.size());
  for (const auto& step : stream.steps) {
    const std::vector<Real> grad = to_real<Real>(step.grad);
    optimizer->apply(params, {grad, step.tau, 0});
    optimizer->advance_round();
  }
  const Snapshot<Real> before = snapshot(*optimizer, params);
  const std::vector<Real> grad = to_real<Real>(last);
  const auto report = optimizer->apply(params, {grad, tau, 0});
  return {report, before, snapshot(*optimizer, params)};
}

// With `skip`, an event at or past τ_cut changes nothing: parameters, m, v and t keep every byte.
template <class Real>
void check_skip_is_a_no_op(const Stream& stream, std::int64_t past) {
  auto config = config_of<Real>(OptimizerKind::cgad);
  config.on_zero_gate = core::ZeroGatePolicy::skip;
  const auto [report, before, after] = apply_last(config, stream, stream.steps.front().grad, 32 + past);
  RC_ASSERT(!report.applied);
  RC_ASSERT(report.reason == core::SkipReason::zero_gate);
  RC_ASSERT(identical(before, after));
}

RC_GTEST_FIXTURE_PROP(OptimizerTest, SkipPastTheCutoffLeavesEveryByte, ()) {
  const Stream stream = *gen_stream(31);
  const std::int64_t past = *rc::gen::inRange<std::int64_t>(0, 1000);
  check_skip_is_a_no_op<mpfr_real>(stream, past);
  check_skip_is_a_no_op<double>(stream, past);
  check_skip_is_a_no_op<float>(stream, past);
}

// With `apply`, the same event is the pure-decay step: t advances, m and v decay by β1, β2 exactly as if the
// gradient were zero, and θ moves on its momentum.
RC_GTEST_FIXTURE_PROP(OptimizerTest, ApplyPastTheCutoffIsThePureDecayStep, ()) {
  Stream stream = *gen_stream(31);
  Stream zeroed = stream;
  const std::int64_t past = *rc::gen::inRange<std::int64_t>(0, 1000);
  stream.steps.push_back({stream.steps.front().grad, 32 + past});
  zeroed.steps.push_back({std::vector<double>(stream.params.size(), 0.0), 0});
  const auto gated = replay(config_of<mpfr_real>(OptimizerKind::cgad), stream);
  const auto decayed = replay(config_of<mpfr_real>(OptimizerKind::cgad), zeroed);
  RC_ASSERT(gated.reports.back().applied);
  RC_ASSERT(gated.params == decayed.params);
  RC_ASSERT(gated.buffers == decayed.buffers);
  RC_ASSERT(gated.counters[0].values == decayed.counters[0].values);
}

// A pseudo-gradient with a NaN or Inf anywhere skips the step for every optimizer and changes nothing.
RC_GTEST_FIXTURE_PROP(OptimizerTest, NonFiniteGradientChangesNothing, ()) {
  const Stream stream = *gen_stream(40);
  const auto kind =
      *rc::gen::element(OptimizerKind::cgad, OptimizerKind::pa_cgad, OptimizerKind::adam_decay, OptimizerKind::adam,
                        OptimizerKind::nesterov, OptimizerKind::delayed_nesterov, OptimizerKind::sdm);
  std::vector<double> bad = stream.steps.front().grad;
  const std::size_t where = *rc::gen::inRange<std::size_t>(0, bad.size());
  bad[where] = *rc::gen::element(std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity());
  const auto [report, before, after] = apply_last(config_of<double>(kind), stream, bad, 1);
  RC_ASSERT(!report.applied);
  RC_ASSERT(report.reason == core::SkipReason::nonfinite_gradient);
  RC_ASSERT(report.nonfinite_index == where);
  RC_ASSERT(identical(before, after));
}

}  // namespace
