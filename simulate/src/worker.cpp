#include "cgad/simulate/worker.hpp"

#include <cmath>

namespace cgad::simulate {

InnerOptimizer::InnerOptimizer(const InnerConfig& config, std::size_t parameters) : config_(config) {
  if (config_.kind == InnerOptimizerKind::adamw) {
    m_.assign(parameters, 0.0f);
    v_.assign(parameters, 0.0f);
  }
}

void InnerOptimizer::step(std::span<float> x, std::span<const float> g) {
  const float lr = config_.lr;
  if (config_.kind == InnerOptimizerKind::sgd) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = x[i] - lr * g[i];
    return;
  }
  ++t_;
  const float b1 = config_.beta1, b2 = config_.beta2;
  const float correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), static_cast<double>(t_)));
  const float correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(b2), static_cast<double>(t_)));
  const float decay = 1.0f - lr * config_.weight_decay;
  for (std::size_t i = 0; i < x.size(); ++i) {
    m_[i] = b1 * m_[i] + (1.0f - b1) * g[i];
    v_[i] = b2 * v_[i] + (1.0f - b2) * (g[i] * g[i]);
    const float m_hat = m_[i] / correction1;
    const float v_hat = v_[i] / correction2;
    x[i] = x[i] * decay - lr * (m_hat / (std::sqrt(v_hat) + config_.eps));
  }
}

Worker::Worker(const InnerConfig& config, std::size_t parameters, std::uint64_t run_seed, std::uint32_t index)
    : steps_(config.steps),
      optimizer_(config, parameters),
      stream_(run_seed, StreamPurpose::worker, index),
      grad_(parameters) {}

void Worker::run(Objective& objective, std::span<float> x) {
  for (std::int64_t step = 0; step < steps_; ++step) {
    objective.gradient(x, stream_, grad_);
    optimizer_.step(x, grad_);
  }
}

}  // namespace cgad::simulate
