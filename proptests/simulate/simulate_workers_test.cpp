// What workers compute and keep: bf16 workers send bf16-granular pseudo-gradients that can be exactly
// zero; μP gives the readout its learning rate and initial scale and is the standard run at the base width;
// PA-CGAD workers keeping fragment progress send everything they did to a fragment since they last took it.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/fragments.hpp"
#include "cgad/reference/real.hpp"
#include "cgad/simulate/lr_scale.hpp"
#include "cgad/simulate/mlp.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/simulation.hpp"
#include "cgad/simulate/worker.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using namespace cgad;
using simulate::SimulationSpec;

bool is_bf16(float x) {
  return (std::bit_cast<std::uint32_t>(x) & 0xFFFFu) == 0;
}

struct Deltas : simulate::ArrivalRecorder {
  std::vector<float> values;
  void start(std::span<const float>, std::span<const std::size_t>) override {}
  void arrival(std::span<const float> grad, std::int64_t, std::size_t) override {
    values.insert(values.end(), grad.begin(), grad.end());
  }
};

SimulationSpec teacher_student(std::size_t width) {
  SimulationSpec spec;
  spec.objective = simulate::ObjectiveKind::teacher_student;
  spec.size = width;
  spec.rounds = 20;
  return spec;
}

double zero_share(const std::vector<float>& x) {
  std::size_t zeros = 0;
  for (const float v : x) zeros += v == 0.0f;
  return static_cast<double>(zeros) / static_cast<double>(x.size());
}

// A bf16 worker's Δ = θ_start − θ_local of two bf16 vectors, rounded once: every element is a bf16 value. With an
// inner lr of 10^-4, AdamW's first steps (≈ lr each) are below half a bf16 ulp of most weights (the W1 entries are
// N(0, 1/16): ulp 2^-9 near 0.25), so the update is lost and Δ is exactly 0 there — what bf16-weight training does
// and fp32 workers never show.
TEST(SimulateWorkers, Bf16WorkersSendBf16GranularDeltasThatCanBeExactlyZero) {
  SimulationSpec spec = teacher_student(32);
  spec.inner.lr = 1e-4f;
  spec.worker_params = simulate::WorkerParams::bf16;
  Deltas bf16;
  simulate::run_simulation(spec, {}, &bf16);
  ASSERT_FALSE(bf16.values.empty());
  for (const float d : bf16.values) ASSERT_TRUE(is_bf16(d)) << std::hexfloat << d;
  EXPECT_GT(zero_share(bf16.values), 0.5);
  spec.worker_params = simulate::WorkerParams::fp32;
  Deltas fp32;
  simulate::run_simulation(spec, {}, &fp32);
  EXPECT_LT(zero_share(fp32.values), 0.01);
  std::size_t narrow = 0;
  for (const float d : fp32.values) narrow += is_bf16(d);
  EXPECT_LT(static_cast<double>(narrow) / static_cast<double>(fp32.values.size()), 0.05);
}

// mlp.hpp's bf16 rounding hook: every gradient element a bf16 value, and the gradient the one of double
// arithmetic on the same bf16 inputs to within bf16's few roundings per operation (norm-wise 2^-5).
TEST(SimulateWorkers, Bf16GradientsAreBf16AndCloseToExact) {
  const simulate::MlpShape shape{16, 24};
  const simulate::WorkerRounding round{true};
  reference::PhiloxStream stream(5, reference::StreamPurpose::initial_point);
  std::vector<float> params(shape.parameters()), inputs(8 * shape.inputs), targets(8);
  for (float& p : params) p = round(static_cast<float>(0.3 * stream.normal()));
  for (float& x : inputs) x = round(static_cast<float>(stream.normal()));
  for (float& t : targets) t = round(static_cast<float>(stream.normal()));
  std::vector<float> grad(params.size()), hidden;
  simulate::mlp_loss<float>(shape, params, inputs, targets, grad, hidden, round);
  const std::vector<double> p64(params.begin(), params.end()), x64(inputs.begin(), inputs.end()),
      t64(targets.begin(), targets.end());
  std::vector<double> exact(params.size()), hidden64;
  simulate::mlp_loss<double>(shape, p64, x64, t64, exact, hidden64);
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    ASSERT_TRUE(is_bf16(grad[i])) << i;
    error += (grad[i] - exact[i]) * (grad[i] - exact[i]);
    norm += exact[i] * exact[i];
  }
  EXPECT_LT(std::sqrt(error), 0x1p-5 * std::sqrt(norm));
  EXPECT_GT(error, 0.0);  // the rounding did happen
}

// lr_scale.hpp: under mup the readout w2 (the third tensor) gets lr × 32/n, every other tensor lr; its initial
// standard deviation is sqrt(32)/n instead of 1/sqrt(n).
TEST(SimulateWorkers, MupGivesTheReadoutItsLearningRateAndScale) {
  using simulate::LrScale;
  using simulate::ObjectiveKind;
  EXPECT_EQ(simulate::lr_multipliers(ObjectiveKind::teacher_student, 128, LrScale::mup),
            (std::vector<float>{1, 1, 0.25f, 1}));
  EXPECT_EQ(simulate::lr_multipliers(ObjectiveKind::teacher_student, 128, LrScale::none),
            (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(simulate::lr_multipliers(ObjectiveKind::nqm, 128, LrScale::mup), (std::vector<float>{1}));
  // The inner AdamW's first step moves every element by its lr times |g|/(|g| + ε) (m̂ = g, v̂ = g² at t = 1):
  // W1, b1 and b2 by 0.01, w2 by 0.0025.
  SimulationSpec spec = teacher_student(128);
  spec.lr_scale = LrScale::mup;
  spec.inner.steps = 1;
  const auto objective = simulate::make_objective(spec);
  const std::vector<std::size_t> tensors = objective->tensor_sizes();
  simulate::Worker worker(spec.inner, tensors, simulate::lr_multipliers(spec.objective, spec.size, spec.lr_scale), {},
                          spec.seed, 0);
  const std::vector<float> start = objective->initial_point(spec.seed);
  std::vector<float> x = start, grad(x.size());
  worker.run(*objective, x, grad);
  const simulate::MlpShape shape{16, 128};
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (grad[i] == 0) continue;
    const double lr = i >= shape.readout() && i < shape.readout_bias() ? 0.0025 : 0.01;
    const double g = std::fabs(static_cast<double>(grad[i]));
    EXPECT_NEAR(std::fabs(x[i] - start[i]), lr * g / (g + 1e-8), lr * 1e-4) << i;
  }
  // The readout's initial scale.
  SimulationSpec wide = teacher_student(4096);
  wide.lr_scale = LrScale::mup;
  const std::vector<float> w = simulate::make_objective(wide)->initial_point(1);
  const simulate::MlpShape wide_shape{16, 4096};
  double squares = 0;
  for (std::size_t i = wide_shape.readout(); i < wide_shape.readout_bias(); ++i)
    squares += static_cast<double>(w[i]) * w[i];
  EXPECT_NEAR(std::sqrt(squares / 4096), std::sqrt(32.0) / 4096, 0.05 * std::sqrt(32.0) / 4096);
}

// At the base width the multipliers are 1: mup is the standard run bit for bit; elsewhere it is another run.
TEST(SimulateWorkers, MupAtTheBaseWidthIsTheStandardRun) {
  SimulationSpec spec = teacher_student(simulate::kMupBaseWidth);
  spec.outer.state = fastpath::StateFormat::q8;
  const simulate::SimulationResult none = simulate::run_simulation(spec);
  spec.lr_scale = simulate::LrScale::mup;
  const simulate::SimulationResult mup = simulate::run_simulation(spec);
  EXPECT_EQ(mup.final_params, none.final_params);
  EXPECT_EQ(mup.final_loss, none.final_loss);
  spec.size = 64;
  const simulate::SimulationResult wide_mup = simulate::run_simulation(spec);
  spec.lr_scale = simulate::LrScale::none;
  EXPECT_NE(wide_mup.final_params, simulate::run_simulation(spec).final_params);
}

TEST(SimulateWorkers, MupIsRefusedWhereItsRulesAreNotImplemented) {
  SimulationSpec spec = teacher_student(64);
  spec.lr_scale = simulate::LrScale::mup;
  EXPECT_NO_THROW(simulate::validate(spec));
  SimulationSpec nesterov = spec;
  nesterov.outer.optimizer = core::OptimizerKind::nesterov;
  EXPECT_THROW(simulate::validate(nesterov), core::InputError);
  SimulationSpec sgd = spec;
  sgd.inner.kind = simulate::InnerOptimizerKind::sgd;
  EXPECT_THROW(simulate::validate(sgd), core::InputError);
  SimulationSpec pa = spec;
  pa.outer.optimizer = core::OptimizerKind::pa_cgad;
  pa.outer.fragments = 2;
  EXPECT_THROW(simulate::validate(pa), core::InputError);
}

// One worker (K = 1), τ = 0, P = 2, and a server that cannot move (PA-CGAD at lr 10^-30: every step is far below
// half an ulp of θ, so θ stays θ_0 bit for bit). Then fragment_progress.hpp's steps are, for round r syncing
// f = r mod 2: take back the fragment g the previous job synced (x_g = θ_0,g), run H steps on all of x, send
// θ_0,f − x_f — everything done to f since it was last taken, two jobs' worth. Discarding, every job restarts from
// θ_0 and sends one job's worth.
TEST(SimulateWorkers, KeptFragmentProgressIsSentWhenTheFragmentIsSynced) {
  SimulationSpec spec;
  spec.size = 12;
  spec.workers = 1;
  spec.nqm_noise = 0;
  spec.inner.kind = simulate::InnerOptimizerKind::sgd;
  spec.inner.lr = 0.3f;
  spec.outer.optimizer = core::OptimizerKind::pa_cgad;
  spec.outer.fragments = 2;
  spec.outer.params = fastpath::ParamFormat::fp32;
  spec.outer.state = fastpath::StateFormat::fp32;
  spec.outer.adam.lr = 1e-30f;
  spec.rounds = 7;
  const auto objective = simulate::make_objective(spec);
  const core::FragmentLayout layout(spec.size, 2);
  const std::vector<float> theta0 = objective->initial_point(spec.seed);
  for (const auto progress : {simulate::FragmentProgress::keep, simulate::FragmentProgress::discard}) {
    SCOPED_TRACE(std::string(simulate::to_string(progress)));
    spec.fragment_progress = progress;
    Deltas sent;
    const simulate::SimulationResult result = simulate::run_simulation(spec, {}, &sent);
    ASSERT_EQ(result.final_params, theta0) << "the server moved";
    simulate::Worker worker(spec.inner, {spec.size}, {1.0f}, {}, spec.seed, 0);
    std::vector<float> x = theta0, grad(x.size()), expected;
    for (std::int64_t r = 0; r < spec.rounds; ++r) {
      const std::size_t f = static_cast<std::size_t>(r % 2), g = 1 - f;
      if (progress == simulate::FragmentProgress::discard) {
        x = theta0;
      } else if (r > 0) {
        for (std::size_t i = layout.offset(g); i < layout.offset(g) + layout.size(g); ++i) x[i] = theta0[i];
      }
      worker.run(*objective, x, grad);
      for (std::size_t i = layout.offset(f); i < layout.offset(f) + layout.size(f); ++i)
        expected.push_back(theta0[i] - x[i]);
    }
    EXPECT_EQ(sent.values, expected);
  }
  // And the two differ: keeping sends more progress.
  spec.fragment_progress = simulate::FragmentProgress::keep;
  Deltas keep, discard;
  simulate::run_simulation(spec, {}, &keep);
  spec.fragment_progress = simulate::FragmentProgress::discard;
  simulate::run_simulation(spec, {}, &discard);
  EXPECT_NE(keep.values, discard.values);
}

// With one fragment nothing is left unsynced: keeping and discarding are the same run.
TEST(SimulateWorkers, KeepingWithOneFragmentIsDiscarding) {
  SimulationSpec spec = teacher_student(16);
  spec.outer.optimizer = core::OptimizerKind::pa_cgad;
  spec.outer.fragments = 1;
  spec.delays = theory::DelayKind::uniform;
  spec.tau = 5;
  const simulate::SimulationResult keep = simulate::run_simulation(spec);
  spec.fragment_progress = simulate::FragmentProgress::discard;
  const simulate::SimulationResult discard = simulate::run_simulation(spec);
  EXPECT_EQ(keep.final_params, discard.final_params);
  EXPECT_EQ(keep.final_loss, discard.final_loss);
}

}  // namespace
