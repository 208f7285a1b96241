// lr = 0, which torch.optim, bitsandbytes and torchao take (a schedule that reaches 0): the reference and the fast
// path run the step, θ keeps its bits, and t and the buffers advance exactly as at lr > 0, which they do not depend
// on (decoupled weight decay moves only θ). docs/design.md §3.
#include "support/fastpath_test_support.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/reference/optimizers.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cgad::fastpath {
namespace {

using core::OptimizerKind;
using testing::describe;
using testing::Params;
using testing::random_vector;

constexpr OptimizerKind kKinds[] = {OptimizerKind::cgad, OptimizerKind::pa_cgad,  OptimizerKind::adam_decay,
                                    OptimizerKind::adam, OptimizerKind::nesterov, OptimizerKind::sdm};
constexpr std::int64_t kTaus[] = {0, 3, 40};  // 40 > τ_cut: CGAD's zero-gate step under `apply`

void set_lr(StepConfig& c, float lr) {
  c.adam.lr = lr;
  c.nesterov.lr = lr;
}

// The state bytes and counters after kTaus through `config` from `initial`, and the parameters' bytes.
struct Outcome {
  std::vector<unsigned char> params, state;
};
Outcome run(const StepConfig& config, const std::vector<std::size_t>& tensors, const std::vector<float>& initial) {
  CpuOptimizer opt(config, tensors, 2);
  Params params(config, initial);
  for (const std::int64_t tau : kTaus) {
    const StepReport report =
        params.step(opt, random_vector(initial.size(), 40 + static_cast<std::uint32_t>(tau)), tau);
    EXPECT_TRUE(report.applied) << describe(config) << " tau " << tau;
  }
  return {params.bytes(), testing::state_bytes(opt)};
}

TEST(ZeroLearningRate, FastPathKeepsTheParametersBitsAndAdvancesTheStateAsAtPositiveLr) {
  const std::vector<std::size_t> tensors = {257, 0, 300, 1, 512, 45};
  std::size_t n = 0;
  for (const std::size_t size : tensors) n += size;
  const std::vector<float> initial = random_vector(n, 7);
  for (const OptimizerKind kind : kKinds) {
    for (StepConfig config : testing::all_format_configs(kind)) {
      const std::string where = describe(config);
      const Outcome stepped = run(config, tensors, initial);
      set_lr(config, 0.0f);
      const Outcome still = run(config, tensors, initial);
      EXPECT_EQ(still.params, Params(config, initial).bytes()) << where;
      EXPECT_NE(stepped.params, still.params) << where;  // the same events at lr > 0 move θ
      EXPECT_EQ(still.state, stepped.state) << where;
    }
  }
}

TEST(ZeroLearningRate, ReferenceKeepsTheParametersAndAdvancesTheStateAsAtPositiveLr) {
  reference::set_working_precision_bits(256);
  using reference::mpfr_real;
  for (const OptimizerKind kind : kKinds) {
    const std::string where(core::to_string(kind));
    const std::vector<float> start = random_vector(6, 3);
    std::vector<std::vector<mpfr_real>> params(2), buffers(2);
    std::vector<std::vector<core::StateCounter>> counters(2);
    for (int k = 0; k < 2; ++k) {
      core::OptimizerConfig<mpfr_real> config;
      config.optimizer = kind;
      config.adam.weight_decay = mpfr_real("0.01");
      if (k == 1) config.adam.lr = config.nesterov.lr = mpfr_real(0);
      auto optimizer = reference::make_optimizer(config, start.size());
      params[k].assign(start.begin(), start.end());
      for (const std::int64_t tau : kTaus) {
        const std::vector<float> grad = random_vector(start.size(), 40 + static_cast<std::uint32_t>(tau));
        const std::vector<mpfr_real> g(grad.begin(), grad.end());
        EXPECT_TRUE(optimizer->apply(params[k], {g, tau, 0}).applied) << where;
        optimizer->advance_round();
      }
      for (const auto& b : optimizer->buffers()) buffers[k].insert(buffers[k].end(), b.values.begin(), b.values.end());
      counters[k] = optimizer->counters();
    }
    EXPECT_EQ(params[1], std::vector<mpfr_real>(start.begin(), start.end())) << where;
    EXPECT_NE(params[0], params[1]) << where;
    EXPECT_EQ(buffers[1], buffers[0]) << where;
    ASSERT_EQ(counters[1].size(), counters[0].size()) << where;
    for (std::size_t c = 0; c < counters[0].size(); ++c) EXPECT_EQ(counters[1][c].values, counters[0][c].values);
  }
}

TEST(ZeroLearningRate, ANegativeLrIsStillRefused) {
  for (const OptimizerKind kind : kKinds) {
    StepConfig config = testing::all_format_configs(kind).front();
    set_lr(config, -0.5f);
    EXPECT_THROW(validate(config), core::InputError) << describe(config);
  }
}

}  // namespace
}  // namespace cgad::fastpath
