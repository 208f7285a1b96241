// Replays the checked-in corpus of hard cases (corpus/differential_one_step.jsonl: gate boundary, bf16 ties,
// tiny and zero v, huge ratios in one q8 block, the largest finite g², block + 1, ...) through the one-step
// differential of differential_one_step.hpp, for every listed optimizer and every format, on every run
// (CORE-MATH's shape, docs/design.md §9). Each line: name, why, optimizers, tau, theta and grad as hexfloat strings
// (tiled cyclically to "n" elements when given), and optional float hyperparameters (hexfloat) and on_zero_gate.
#include "support/differential_generators.hpp"
#include "support/differential_one_step.hpp"

#include "cgad/reference/real.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace cgad::proptests {
namespace {

using fastpath::ParamFormat;
using fastpath::Rounding;
using fastpath::StateFormat;

std::vector<float> tiled(const nlohmann::json& values, std::size_t n) {
  std::vector<float> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(std::strtof(values[i % values.size()].get<std::string>().c_str(), nullptr));
  return out;
}

float hyper(const nlohmann::json& c, const char* key, float fallback) {
  return c.contains(key) ? std::strtof(c[key].get<std::string>().c_str(), nullptr) : fallback;
}

TEST(DifferentialCorpus, EveryHardCaseWithinItsBoundInEveryFormat) {
  reference::set_working_precision_bits(128);
  std::ifstream in(CGAD_DIFFERENTIAL_CORPUS);
  ASSERT_TRUE(in) << "cannot open " << CGAD_DIFFERENTIAL_CORPUS;
  OneStepSummary summary;
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    const std::size_t n = c.value("n", c["grad"].size());
    const auto theta = tiled(c["theta"], n);
    const auto grad = tiled(c["grad"], n);
    for (const auto& name : c["optimizers"]) {
      for (const ParamFormat params : {ParamFormat::fp32, ParamFormat::bf16}) {
        for (const StateFormat state : {StateFormat::fp32, StateFormat::bf16, StateFormat::q8}) {
          for (const Rounding rounding : {Rounding::nearest, Rounding::stochastic}) {
            fastpath::StepConfig config;
            config.optimizer = core::parse_optimizer(name.get<std::string>());
            config.params = params;
            config.state = state;
            config.rounding = rounding;
            config.seed = 0x5EED;
            config.adam.lr = hyper(c, "lr", config.adam.lr);
            config.adam.beta1 = hyper(c, "beta1", config.adam.beta1);
            config.adam.beta2 = hyper(c, "beta2", config.adam.beta2);
            config.adam.eps = hyper(c, "eps", config.adam.eps);
            config.adam.weight_decay = hyper(c, "weight_decay", config.adam.weight_decay);
            config.alpha = hyper(c, "alpha", config.alpha);
            config.tau_cut = hyper(c, "tau_cut", config.tau_cut);
            if (c.value("on_zero_gate", "apply") == "skip") config.on_zero_gate = core::ZeroGatePolicy::skip;
            const OneStepOutcome outcome = check_one_step(config, theta, grad, c["tau"].get<std::int64_t>());
            EXPECT_EQ(outcome.failure, "")
                << c["name"].get<std::string>() << " " << fastpath::testing::describe(config);
            EXPECT_EQ(outcome.outside_fp32, 0u)
                << c["name"].get<std::string>() << " " << fastpath::testing::describe(config);
            summary.add(fastpath::testing::describe(config), outcome);
          }
        }
      }
    }
    ++cases;
  }
  EXPECT_GE(cases, 20);
  summary.print();
}

}  // namespace
}  // namespace cgad::proptests
