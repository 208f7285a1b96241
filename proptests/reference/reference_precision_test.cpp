// The reference against values worked out independently, across precisions, and its refusals of bad input.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "support/reference_streams.hpp"

#include "cgad/reference/optimizers.hpp"

namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
using core::OptimizerKind;
using ref::mpfr_real;

class PrecisionTest : public ::testing::Test {
 protected:
  void SetUp() override { ref::set_working_precision_bits(256); }
};

mpfr_real R(const char* text) {
  return core::parse_real<mpfr_real>(text, "test");
}

std::vector<mpfr_real> run(OptimizerKind kind, std::vector<mpfr_real> params,
                           const std::vector<std::pair<std::vector<mpfr_real>, std::int64_t>>& events,
                           const std::function<void(core::OptimizerConfig<mpfr_real>&)>& tweak = {}) {
  core::OptimizerConfig<mpfr_real> config;
  config.optimizer = kind;
  if (tweak) tweak(config);
  auto optimizer = ref::make_optimizer(config, params.size());
  for (const auto& [grad, tau] : events) {
    EXPECT_TRUE(optimizer->apply(params, {grad, tau, 0}).applied);
    optimizer->advance_round();
  }
  return params;
}

// Each expected value below was computed outside cgad, at 110 significant digits, with Python's decimal
// module (π by Machin's formula, cos by its Taylor series, exp and sqrt from decimal), from the update rules
// of docs/design.md §3 written out by hand. A handful of correctly rounded 257-bit operations lie between input
// and result, so they must agree to 2^-250 relative (about 64 ulps).
void expect_close(const mpfr_real& actual, const char* expected) {
  const mpfr_real want = R(expected);
  EXPECT_LE(abs(actual - want), abs(want) * ldexp(mpfr_real(1), -250))
      << "actual " << core::to_decimal(actual, 60) << "\nwanted " << expected;
}

TEST_F(PrecisionTest, OneCgadStepFromRestMatchesTheHandValue) {
  // θ0 = 1, Δ = 0.5, τ = 3: g = σ(3)·Δ, m̂ = g, v̂ = g², θ1 = 1 − η·g/(|g| + ε).
  expect_close(
      core::sigma(mpfr_real(3), core::GateParams<mpfr_real>{core::GateKind::cosine, R("0.2"), mpfr_real(32)}),
      "0.53699581369579346184737829242533494368406922878055834443954187803404551060045858424567857103815760459");
  expect_close(
      run(OptimizerKind::cgad, {R("1")}, {{{R("0.5")}, 3}})[0],
      "0.99900000003724423681717042957224847736248599927394629748397562402345161739296531308042401717435574167");
}

TEST_F(PrecisionTest, TwoAdamStepsMatchTheHandValue) {
  // θ0 = 0, Δ1 = 1, Δ2 = −2: m2 = −0.11, v2 = 0.004999, bias corrections 0.19 and 0.001999.
  expect_close(
      run(OptimizerKind::adam, {R("0")}, {{{R("1")}, 0}, {{R("-2")}, 0}})[0],
      "-0.00063389646527924911794492851072850701679977306133189494903674104447505061169522612759040314791668883");
}

TEST_F(PrecisionTest, WeightDecayAloneMatchesTheHandValue) {
  // Δ = 0 leaves m = v = 0, so θ1 = θ0 − η·λ·θ0 = 2 − 1e-3·0.1·2.
  expect_close(run(OptimizerKind::cgad, {R("2")}, {{{R("0")}, 0}}, [](auto& c) { c.adam.weight_decay = R("0.1"); })[0],
               "1.9998");
}

TEST_F(PrecisionTest, NesterovFamilyMatchesHandValues) {
  // Nesterov, θ0 = 1, Δ = 0.5 then 0.25: b1 = 0.5, θ1 = 1 − 0.7·0.95 = 0.335; b2 = 0.7, θ2 = 0.335 − 0.7·0.88.
  expect_close(run(OptimizerKind::nesterov, {R("1")}, {{{R("0.5")}, 0}, {{R("0.25")}, 5}})[0], "-0.281");
  // Delayed Nesterov N = 2, θ0 = 0, Δ = 1 then 3: θ1 = −0.7·0.5; then D = 4, b = 2, θ2 = θ1 − 0.7·(1.8 + 1.5).
  expect_close(
      run(OptimizerKind::delayed_nesterov, {R("0")}, {{{R("1")}, 0}, {{R("3")}, 0}}, [](auto& c) { c.buffer = 2; })[0],
      "-2.66");
  // SDM, τ = 3: d = Δ/4 = 0.25, b = 0.25, θ1 = −0.7·(0.25 + 0.225).
  expect_close(run(OptimizerKind::sdm, {R("0")}, {{{R("1")}, 3}})[0], "-0.3325");
}

// The same 100-step stream at 257 and 513 bits. Error budget for the 257-bit run, per step and element: about
// 16 correctly rounded operations, each ≤ u = 2^-257 relative; Adam's step direction is bounded by
// (1−β1)/sqrt(1−β2) ≈ 3.2 (Kingma & Ba 2015, §2.1) and m, v contract, so the absolute error in θ after
// T steps is below T·(η·16·3.2·u + u·|θ|) < 2^-240·(1 + |θ|) for T = 100, η = 1e-3 — with 2^9 to spare.
RC_GTEST_FIXTURE_PROP(PrecisionTest, AgreesAcrossPrecisionsWithinTheRoundingBudget, ()) {
  cgad::proptests::Stream stream = *cgad::proptests::gen_stream(40, 4, 1);
  const auto more = *rc::gen::container<std::vector<cgad::proptests::StreamStep>>(
      99, rc::gen::build<cgad::proptests::StreamStep>(
              rc::gen::set(&cgad::proptests::StreamStep::grad,
                           rc::gen::container<std::vector<double>>(stream.params.size(), cgad::proptests::gen_value())),
              rc::gen::set(&cgad::proptests::StreamStep::tau, rc::gen::inRange<std::int64_t>(0, 41))));
  stream.steps.insert(stream.steps.end(), more.begin(), more.end());
  const auto kind = *rc::gen::element(OptimizerKind::cgad, OptimizerKind::adam_decay, OptimizerKind::pa_cgad);

  auto replay_at = [&](unsigned bits) {
    ref::set_working_precision_bits(bits);
    std::vector<std::pair<std::vector<mpfr_real>, std::int64_t>> events;
    for (const auto& s : stream.steps) events.push_back({cgad::proptests::to_real<mpfr_real>(s.grad), s.tau});
    std::vector<std::string> out;
    for (const auto& x : run(kind, cgad::proptests::to_real<mpfr_real>(stream.params), events))
      out.push_back(core::to_decimal(x));
    return out;
  };
  const auto narrow = replay_at(256);
  const auto wide = replay_at(512);
  for (std::size_t i = 0; i < wide.size(); ++i) {
    const mpfr_real a = R(narrow[i].c_str());
    const mpfr_real b = R(wide[i].c_str());
    RC_ASSERT(abs(a - b) <= ldexp(mpfr_real(1), -240) * (1 + abs(b)));
  }
  ref::set_working_precision_bits(256);
}

TEST_F(PrecisionTest, EffectivePrecisionIsAtLeastTheRequest) {
  EXPECT_EQ(ref::set_working_precision_bits(256), 257u);  // Boost: 77 decimal digits
  EXPECT_EQ(mpfr_get_prec(mpfr_real(1).backend().data()), 257);
  for (unsigned bits : {64u, 112u, 128u, 200u, 512u, 1000u}) EXPECT_GE(ref::set_working_precision_bits(bits), bits);
  EXPECT_THROW(ref::set_working_precision_bits(53), core::InputError);
  EXPECT_THROW(ref::set_working_precision_bits(1u << 20), core::InputError);
}

TEST_F(PrecisionTest, ParsingIsExactAndStrict) {
  // 0.1 is rounded once, to 257 bits, not through the double nearest to it.
  EXPECT_NE(R("0.1"), mpfr_real(0.1));
  EXPECT_LE(abs(R("0.1") * 10 - 1), ldexp(mpfr_real(1), -256));
  EXPECT_EQ(core::parse_real<float>("0.1", "x"), 0.1f);
  EXPECT_EQ(core::parse_real<double>("+2.5e-3", "x"), 2.5e-3);
  for (const char* bad : {"", "abc", "1.0x", "1,5", " 1", "--1"}) {
    EXPECT_THROW(core::parse_real<mpfr_real>(bad, "x"), core::InputError) << bad;
    EXPECT_THROW(core::parse_real<double>(bad, "x"), core::InputError) << bad;
  }
  EXPECT_THROW(core::parse_real<float>("1e100", "x"), core::InputError);
}

TEST_F(PrecisionTest, EveryBadHyperparameterIsRefused) {
  using Tweak = std::function<void(core::OptimizerConfig<mpfr_real>&)>;
  const std::vector<std::pair<OptimizerKind, Tweak>> bad = {
      {OptimizerKind::cgad, [](auto& c) { c.adam.lr = -1; }},
      {OptimizerKind::cgad, [](auto& c) { c.adam.beta1 = 1; }},
      {OptimizerKind::cgad, [](auto& c) { c.adam.beta1 = -R("0.1"); }},
      {OptimizerKind::cgad, [](auto& c) { c.adam.beta2 = 1; }},
      {OptimizerKind::cgad, [](auto& c) { c.adam.eps = 0; }},
      {OptimizerKind::cgad, [](auto& c) { c.adam.weight_decay = -1; }},
      {OptimizerKind::cgad, [](auto& c) { c.alpha = -R("0.2"); }},
      {OptimizerKind::cgad, [](auto& c) { c.tau_cut = 0; }},
      {OptimizerKind::adam, [](auto& c) { c.adam.lr = std::numeric_limits<mpfr_real>::quiet_NaN(); }},
      {OptimizerKind::nesterov, [](auto& c) { c.nesterov.lr = -1; }},
      {OptimizerKind::sdm, [](auto& c) { c.nesterov.momentum = 1; }},
      {OptimizerKind::delayed_nesterov, [](auto& c) { c.buffer = 0; }},
      {OptimizerKind::cgad, [](auto& c) { c.fragments = 2; }},
      {OptimizerKind::pa_cgad, [](auto& c) { c.fragments = 5; }},  // 5 fragments over 4 parameters: one is empty
      {OptimizerKind::pa_cgad, [](auto& c) { c.fragments = 0; }},
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    core::OptimizerConfig<mpfr_real> config;
    config.optimizer = bad[i].first;
    bad[i].second(config);
    EXPECT_THROW(ref::make_optimizer(config, 4), core::InputError) << "case " << i;
  }
  EXPECT_THROW(cgad::core::parse_optimizer("adamw"), core::InputError);
}

TEST_F(PrecisionTest, BadEventsAreRefusedAndChangeNothing) {
  core::OptimizerConfig<mpfr_real> config;
  config.optimizer = OptimizerKind::pa_cgad;
  config.fragments = 2;
  auto optimizer = ref::make_optimizer(config, 4);
  std::vector<mpfr_real> params(4, mpfr_real(1));
  const std::vector<mpfr_real> two(2, mpfr_real(1)), three(3, mpfr_real(1));
  EXPECT_THROW(optimizer->apply(params, {three, 0, 0}), core::InputError);  // wrong length for fragment 0
  EXPECT_THROW(optimizer->apply(params, {two, 0, 2}), core::InputError);    // no fragment 2
  EXPECT_THROW(optimizer->apply(params, {two, -1, 0}), core::InputError);   // negative staleness
  std::vector<mpfr_real> short_params(3, mpfr_real(1));
  EXPECT_THROW(optimizer->apply(short_params, {two, 0, 0}), core::InputError);
  EXPECT_EQ(params, std::vector<mpfr_real>(4, mpfr_real(1)));
  EXPECT_EQ(optimizer->counters()[0].values, (std::vector<std::int64_t>{0, 0}));
}

}  // namespace
