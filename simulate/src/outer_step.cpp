#include "outer_step.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/reference/optimizers.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <type_traits>

namespace cgad::simulate {

bool runs_delayed_nesterov(const SimulationSpec& spec) {
  return spec.delayed_nesterov || spec.outer.optimizer == core::OptimizerKind::delayed_nesterov;
}

namespace {

float widen(fastpath::bf16 x) {
  return fastpath::to_float(x);
}

}  // namespace

OuterStep::OuterStep(const SimulationSpec& spec, const std::vector<std::size_t>& tensors,
                     const std::vector<float>& lr_multipliers) {
  tensor_begin_.push_back(0);
  for (const std::size_t size : tensors) tensor_begin_.push_back(tensor_begin_.back() + size);
  const std::size_t parameters = tensor_begin_.back();
  if (runs_delayed_nesterov(spec)) {
    core::OptimizerConfig<float> config = fastpath::reference_config<float>(spec.outer);
    config.optimizer = core::OptimizerKind::delayed_nesterov;
    config.buffer = spec.delayed_nesterov_buffer;
    reference_ = reference::make_optimizer<float>(config, parameters);
    return;
  }
  // Groups in the order of their first tensor, each holding every tensor with its multiplier.
  std::vector<float> group_multipliers;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    std::size_t g = 0;
    while (g < group_multipliers.size() && group_multipliers[g] != lr_multipliers[t]) ++g;
    if (g == group_multipliers.size()) {
      group_multipliers.push_back(lr_multipliers[t]);
      groups_.emplace_back();
    }
    groups_[g].tensors.push_back(t);
  }
  const bool adam = core::is_adam_family(spec.outer.optimizer);
  std::vector<double> element_lr(parameters);
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    fastpath::StepConfig config = spec.outer;
    config.adam.lr = spec.outer.adam.lr * group_multipliers[g];
    std::vector<std::size_t> sizes;
    for (const std::size_t t : groups_[g].tensors) {
      sizes.push_back(tensors[t]);
      for (std::size_t i = tensor_begin_[t]; i < tensor_begin_[t + 1]; ++i) element_lr[i] = config.adam.lr;
    }
    // One thread: the caller parallelizes over runs, and the step's bits do not depend on it.
    groups_[g].optimizer = std::make_unique<fastpath::CpuOptimizer>(config, sizes, 1);
  }
  if (groups_.size() > 1 && spec.outer.fragments != 1) {
    throw std::logic_error("per-tensor learning rates with fragments");  // validate_lr_scale refuses it first
  }
  if (adam) trap_.emplace(std::move(element_lr), tensors);
}

template <class Param>
fastpath::StepReport OuterStep::step_groups(std::span<Param> params, std::span<const float> grad, std::int64_t tau,
                                            std::size_t fragment) {
  if (reference_) {
    if constexpr (std::is_same_v<Param, float>) {
      return reference_->apply(params, reference::Event<float>{grad, tau, fragment});
    } else {
      throw core::InputError("delayed-nesterov needs fp32 params");  // validate() refuses this first
    }
  }
  if (groups_.size() == 1) return groups_.front().optimizer->step(params, grad, tau, fragment);
  // Several groups (one fragment, so `grad` is the whole Δ): each group's table of its tensors.
  std::vector<std::vector<Param*>> param_table(groups_.size());
  std::vector<std::vector<const float*>> grad_table(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (const std::size_t t : groups_[g].tensors) {
      param_table[g].push_back(params.data() + tensor_begin_[t]);
      grad_table[g].push_back(grad.data() + tensor_begin_[t]);
    }
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const fastpath::StepReport preview = groups_[g].optimizer->preview(grad_table[g], tau);
    if (!preview.applied) return preview;
  }
  fastpath::StepReport report;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const fastpath::StepReport r = groups_[g].optimizer->step(std::span<Param* const>(param_table[g]),
                                                              std::span<const float* const>(grad_table[g]), tau);
    if (g == 0) report = r;
  }
  return report;
}

fastpath::StepReport OuterStep::step(std::span<float> params, std::span<const float> grad, std::int64_t tau,
                                     std::size_t fragment) {
  if (trap_) trap_->before(params);
  const fastpath::StepReport report = step_groups(params, grad, tau, fragment);
  if (trap_) trap_->after(params);
  return report;
}

fastpath::StepReport OuterStep::step(std::span<fastpath::bf16> params, std::span<const float> grad, std::int64_t tau,
                                     std::size_t fragment) {
  const auto widen_all = [&] {
    widened_.resize(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) widened_[i] = widen(params[i]);
    return std::span<const float>(widened_);
  };
  if (trap_) trap_->before(widen_all());
  const fastpath::StepReport report = step_groups(params, grad, tau, fragment);
  if (trap_) trap_->after(widen_all());
  return report;
}

void OuterStep::advance_round() {
  if (reference_) {
    reference_->advance_round();
    return;
  }
  for (Group& group : groups_) group.optimizer->advance_round();
}

std::vector<float> OuterStep::moment_in_layout(const char* name) const {
  std::vector<float> out(tensor_begin_.back());
  for (const Group& group : groups_) {
    std::vector<float> buffer(group.optimizer->parameters());
    group.optimizer->read_buffer(name, buffer);
    std::size_t at = 0;
    for (const std::size_t t : group.tensors) {
      const std::size_t size = tensor_begin_[t + 1] - tensor_begin_[t];
      std::copy_n(buffer.begin() + static_cast<std::ptrdiff_t>(at), size,
                  out.begin() + static_cast<std::ptrdiff_t>(tensor_begin_[t]));
      at += size;
    }
  }
  return out;
}

std::optional<OuterStep::TrapReport> OuterStep::trap() const {
  if (!trap_) return std::nullopt;
  const std::vector<float> v = moment_in_layout("v"), m = moment_in_layout("m");
  return TrapReport{trap_->summary(v, m), trap_->tensor_summaries(v, m)};
}

}  // namespace cgad::simulate
