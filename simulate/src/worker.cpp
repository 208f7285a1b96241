#include "cgad/simulate/worker.hpp"

#include "cgad/reference/optimizers.hpp"

namespace cgad::simulate {
namespace {

std::unique_ptr<reference::OuterOptimizer<float>> make_adamw(const InnerConfig& config, std::size_t parameters) {
  if (config.kind != InnerOptimizerKind::adamw) return nullptr;
  reference::OptimizerConfig<float> adam;
  adam.kind = reference::OptimizerKind::adam;
  adam.adam = reference::AdamHyper<float>{config.lr, config.beta1, config.beta2, config.eps, config.weight_decay};
  return reference::make_optimizer<float>(adam, parameters);
}

}  // namespace

InnerOptimizer::InnerOptimizer(const InnerConfig& config, std::size_t parameters)
    : sgd_lr_(config.lr), adamw_(make_adamw(config, parameters)) {}

bool InnerOptimizer::step(std::span<float> x, std::span<const float> g) {
  if (adamw_) return adamw_->apply(x, reference::Event<float>{g, 0, 0}).applied;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = x[i] - sgd_lr_ * g[i];
  return true;
}

Worker::Worker(const InnerConfig& config, std::size_t parameters, std::uint64_t run_seed, std::uint32_t index)
    : steps_(config.steps), optimizer_(config, parameters), stream_(run_seed, reference::StreamPurpose::worker, index) {}

std::int64_t Worker::run(Objective& objective, std::span<float> x, std::span<float> grad) {
  std::int64_t skipped = 0;
  for (std::int64_t step = 0; step < steps_; ++step) {
    objective.gradient(x, stream_, grad);
    if (!optimizer_.step(x, grad)) ++skipped;
  }
  return skipped;
}

}  // namespace cgad::simulate
