#include "cgad/fastpath/step_planner.hpp"

#include "cgad/fastpath/q8_maps.hpp"
#include "cgad/reference/errors.hpp"
#include "cgad/reference/gate.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace cgad::fastpath {

StepPlanner::StepPlanner(const StepConfig& config, std::size_t parameters)
    : config_((validate(config), config)),
      gate_(gate_params<double>(config)),
      layout_(parameters == 0 && config.fragments == 1
                                                       ? reference::FragmentLayout(1, 1)
                                                       : reference::FragmentLayout(parameters, config.fragments)) {
  // An empty tensor is fine (one empty fragment); FragmentLayout refuses empty fragments, so it is built
  // over one element and the sizes below use `parameters`.
  first_block_.assign(config.fragments + 1, 0);
  for (std::size_t f = 0; f < config.fragments; ++f) {
    const std::size_t size = parameters == 0 ? 0 : layout_.size(f);
    first_block_[f + 1] = first_block_[f] + block_count(size);
  }
  empty_ = parameters == 0;
  counters_.t.assign(config.fragments, 0);
  counters_.ages.assign(config.fragments, 0);
}

StepPlanner::Plan StepPlanner::plan(std::size_t params_size, std::size_t grad_size, std::int64_t tau,
                                    std::size_t fragment) const {
  const std::size_t parameters = empty_ ? 0 : layout_.parameters();
  if (params_size != parameters) {
    throw reference::InputError("parameter vector has " + std::to_string(params_size) + " elements, the optimizer " +
                                std::to_string(parameters));
  }
  if (fragment >= config_.fragments) {
    throw reference::InputError("fragment " + std::to_string(fragment) + " does not exist (there are " +
                                std::to_string(config_.fragments) + ")");
  }
  const std::size_t size = empty_ ? 0 : layout_.size(fragment);
  if (grad_size != size) {
    throw reference::InputError("pseudo-gradient has " + std::to_string(grad_size) + " elements, fragment " +
                                std::to_string(fragment) + " has " + std::to_string(size));
  }
  if (tau < 0) throw reference::InputError("staleness tau must be >= 0, got " + std::to_string(tau));

  Plan plan;
  plan.fragment = fragment;
  plan.offset = empty_ ? 0 : layout_.offset(fragment);
  plan.first_block = first_block_[fragment];
  StepArgs& a = plan.args;
  a.params = config_.params == ParamFormat::fp32 ? ParamCode::fp32 : ParamCode::bf16;
  a.state = static_cast<StateCode>(config_.state);
  a.stochastic = config_.rounding == Rounding::stochastic;
  a.moments = moments();
  a.seed = config_.seed;
  a.step = counters_.steps + 1;
  a.first_index = plan.offset;
  a.size = size;
  plan.report.tau_effective = tau;

  if (adam_family()) {
    const bool ages = config_.optimizer == reference::OptimizerKind::pa_cgad;
    const std::int64_t tau_effective = ages ? std::max(tau, counters_.ages[fragment]) : tau;
    const float sigma = static_cast<float>(reference::sigma(static_cast<double>(tau_effective), gate_));
    plan.report.tau_effective = tau_effective;
    plan.report.sigma = sigma;
    // `skip` drops an event whose gate is zero (γ = 0, the cosine gate at τ ≥ τ_cut), exactly as the
    // reference decides it; a σ that only rounds to 0 in float (Adam-Decay past ατ ≈ 104) is applied.
    if (config_.on_zero_gate == reference::ZeroGatePolicy::skip &&
        reference::gamma(static_cast<double>(tau_effective), gate_) == 0.0) {
      plan.report.applied = false;
      plan.report.reason = reference::SkipReason::zero_gate;
      return plan;
    }
    const auto& h = config_.adam;
    const double t = static_cast<double>(counters_.t[fragment] + 1);
    a.family = UpdateFamily::adam;
    a.adam = AdamCoefficients{
        .sigma = sigma,
        .beta1 = h.beta1,
        .one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(h.beta1)),
        .beta2 = h.beta2,
        .one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(h.beta2)),
        .bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), t)),
        .bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta2), t)),
        .lr = h.lr,
        .eps = h.eps,
        .weight_decay = h.weight_decay,
    };
    a.moment[0].map = &dynamic_map(Q8MapKind::signed_map);
    a.moment[0].random_word = kWordFirstMoment;
    a.moment[1].map = &dynamic_map(Q8MapKind::unsigned_map);
    a.moment[1].random_word = kWordSecondMoment;
  } else {
    // SDM: Δ scaled by 1/(1 + τ) (reference/nesterov.hpp); Nesterov is staleness-blind.
    const float sigma = config_.optimizer == reference::OptimizerKind::sdm
                            ? static_cast<float>(1.0 / (1.0 + static_cast<double>(tau)))
                            : 1.0f;
    plan.report.sigma = sigma;
    a.family = UpdateFamily::nesterov;
    a.nesterov = NesterovCoefficients{.sigma = sigma, .momentum = config_.nesterov.momentum, .lr = config_.nesterov.lr};
    a.moment[0].map = &dynamic_map(Q8MapKind::signed_map);
    a.moment[0].random_word = kWordFirstMoment;
  }
  return plan;
}

void StepPlanner::commit(const Plan& plan) {
  ++counters_.steps;
  if (adam_family()) ++counters_.t[plan.fragment];
  if (config_.optimizer == reference::OptimizerKind::pa_cgad) counters_.ages[plan.fragment] = 0;
}

void StepPlanner::advance_round() {
  if (config_.optimizer == reference::OptimizerKind::pa_cgad) {
    for (auto& age : counters_.ages) ++age;
  }
}

std::vector<reference::StateCounter> StepPlanner::counters() const {
  std::vector<reference::StateCounter> out;
  if (adam_family()) out.push_back({"t", counters_.t});
  if (config_.optimizer == reference::OptimizerKind::pa_cgad) out.push_back({"age", counters_.ages});
  return out;
}

void StepPlanner::set_raw_counters(Counters counters) {
  if (counters.t.size() != config_.fragments || counters.ages.size() != config_.fragments) {
    throw reference::InputError("state has counters for " + std::to_string(counters.t.size()) +
                                " fragments, the optimizer has " + std::to_string(config_.fragments));
  }
  for (std::size_t f = 0; f < config_.fragments; ++f) {
    if (counters.t[f] < 0 || counters.ages[f] < 0) {
      throw reference::InputError("state has a negative step count or age in fragment " + std::to_string(f));
    }
  }
  counters_ = std::move(counters);
}

}  // namespace cgad::fastpath
