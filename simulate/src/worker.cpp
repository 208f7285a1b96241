#include "cgad/simulate/worker.hpp"

#include "cgad/reference/optimizers.hpp"
#include "cgad/core/overflow_rule.hpp"

#include <cmath>

namespace cgad::simulate {
namespace {

std::unique_ptr<reference::OuterOptimizer<float>> make_adamw(const InnerConfig& config, float lr_multiplier,
                                                             std::size_t parameters) {
  core::OptimizerConfig<float> adam;
  adam.optimizer = core::OptimizerKind::adam;
  adam.adam =
      core::AdamHyper<float>{config.lr * lr_multiplier, config.beta1, config.beta2, config.eps, config.weight_decay};
  return reference::make_optimizer<float>(adam, parameters);
}

// The reference's refusal, decided once for the whole gradient so that several groups take or refuse it together.
bool refused(std::span<const float> g) {
  const float limit = std::ldexp(1.0f, core::kRefusedGradientExponent);
  for (const float x : g) {
    if (!std::isfinite(x) || std::fabs(x) >= limit) return true;
  }
  return false;
}

}  // namespace

InnerOptimizer::InnerOptimizer(const InnerConfig& config, const std::vector<std::size_t>& tensors,
                               const std::vector<float>& lr_multipliers, WorkerRounding round)
    : sgd_lr_(config.lr), round_(round) {
  if (config.kind != InnerOptimizerKind::adamw) return;
  std::vector<float> group_multipliers;
  std::size_t offset = 0;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (adamw_.empty() || lr_multipliers[t] != group_multipliers.back()) {
      adamw_.push_back({offset, 0, nullptr});
      group_multipliers.push_back(lr_multipliers[t]);
    }
    adamw_.back().size += tensors[t];
    offset += tensors[t];
  }
  for (std::size_t g = 0; g < adamw_.size(); ++g)
    adamw_[g].adamw = make_adamw(config, group_multipliers[g], adamw_[g].size);
}

bool InnerOptimizer::step(std::span<float> x, std::span<const float> g) {
  if (!adamw_.empty()) {
    if (refused(g)) return false;
    for (const Group& group : adamw_) {
      group.adamw->apply(x.subspan(group.offset, group.size),
                         reference::Event<float>{g.subspan(group.offset, group.size), 0, 0});
    }
  } else {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = x[i] - sgd_lr_ * g[i];
  }
  if (round_.bf16) {
    for (float& value : x) value = round_(value);
  }
  return true;
}

Worker::Worker(const InnerConfig& config, const std::vector<std::size_t>& tensors,
               const std::vector<float>& lr_multipliers, WorkerRounding round, std::uint64_t run_seed,
               std::uint32_t index)
    : steps_(config.steps),
      optimizer_(config, tensors, lr_multipliers, round),
      stream_(run_seed, reference::StreamPurpose::worker, index) {}

std::int64_t Worker::run(Objective& objective, std::span<float> x, std::span<float> grad) {
  std::int64_t skipped = 0;
  for (std::int64_t step = 0; step < steps_; ++step) {
    objective.gradient(x, stream_, grad);
    if (!optimizer_.step(x, grad)) ++skipped;
  }
  return skipped;
}

}  // namespace cgad::simulate
