#include "cgad/fastpath/step_planner.hpp"

#include "cgad/fastpath/q8_maps.hpp"
#include "cgad/reference/errors.hpp"
#include "cgad/reference/gate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace cgad::fastpath {

namespace {

std::size_t checked_sum(const std::vector<std::size_t>& sizes) {
  std::size_t total = 0;
  for (const std::size_t size : sizes) {
    if (size > std::numeric_limits<std::size_t>::max() - total) {
      throw reference::InputError("tensor sizes overflow a 64-bit parameter count");
    }
    total += size;
  }
  return total;
}

// FragmentLayout refuses empty fragments; zero parameters in one fragment are fine here (one empty fragment),
// so the layout is then built over one element and every size below uses the real count.
reference::FragmentLayout layout_over(std::size_t parameters, std::size_t fragments) {
  return parameters == 0 && fragments == 1 ? reference::FragmentLayout(1, 1)
                                           : reference::FragmentLayout(parameters, fragments);
}

}  // namespace

StepPlanner::StepPlanner(const StepConfig& config, std::size_t parameters)
    : StepPlanner(config, std::vector<std::size_t>{parameters}) {}

StepPlanner::StepPlanner(const StepConfig& config, std::vector<std::size_t> tensor_sizes)
    : config_((validate(config), config)),
      gate_(gate_params<double>(config)),
      layout_(layout_over(checked_sum(tensor_sizes), config.fragments)),
      empty_(checked_sum(tensor_sizes) == 0),
      tensors_(std::move(tensor_sizes)) {
  const bool q8 = config.state == StateFormat::q8;
  const std::size_t min_q8 = effective_min_q8_size(config);
  // Each tensor's first element and, for a tensor that keeps fp32 state, its first moment in the fallback.
  std::vector<std::size_t> tensor_begin(tensors_.size() + 1, 0), fallback_begin(tensors_.size(), 0);
  for (std::size_t k = 0; k < tensors_.size(); ++k) {
    tensor_begin[k + 1] = tensor_begin[k] + tensors_[k];
    fallback_begin[k] = fallback_size_;
    if (q8 && tensors_[k] < min_q8) fallback_size_ += tensors_[k];
  }
  chunk_begin_.assign(config.fragments + 1, 0);
  std::size_t tensor = 0;
  for (std::size_t f = 0; f < config.fragments; ++f) {
    const std::size_t begin = empty_ ? 0 : layout_.offset(f), end = begin + fragment_size(f);
    for (std::size_t at = begin; at < end;) {
      while (tensor_begin[tensor + 1] <= at) ++tensor;  // the tensor holding element `at` (skips empty ones)
      const std::size_t stop = std::min(end, tensor_begin[tensor + 1]);
      const bool fallback = q8 && tensors_[tensor] < min_q8;
      for (std::size_t first = at; first < stop; first += kQ8BlockSize) {
        StepChunk c;
        c.begin = first;
        c.count = static_cast<std::uint32_t>(std::min<std::size_t>(kQ8BlockSize, stop - first));
        c.fp32_state = fallback ? 1 : 0;
        c.slot = fallback ? fallback_begin[tensor] + (first - tensor_begin[tensor]) : (q8 ? q8_blocks_++ : first);
        chunks_.push_back(c);
      }
      at = stop;
    }
    chunk_begin_[f + 1] = chunks_.size();
  }
  counters_.t.assign(config.fragments, 0);
  counters_.last_sync.assign(config.fragments, -1);
}

std::int64_t StepPlanner::age(std::size_t fragment) const {
  return std::max<std::int64_t>(0, counters_.round - counters_.last_sync[fragment] - 1);
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
  StepArgs& a = plan.args;
  a.params = config_.params;
  a.state = config_.state;
  a.stochastic = config_.rounding == Rounding::stochastic;
  a.bnb = config_.q8_semantics == Q8Semantics::bnb;
  a.moments = moments();
  a.seed = config_.seed;
  a.step = counters_.steps + 1;
  a.first_index = plan.offset;
  a.size = size;
  plan.report.tau_effective = tau;

  if (adam_family()) {
    const bool ages = config_.optimizer == reference::OptimizerKind::pa_cgad;
    const std::int64_t tau_effective = ages ? std::max(tau, age(fragment)) : tau;
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
    // bnb's corrections in float from β^t evaluated in double and rounded once (its GPU uses __powf/powf).
    const float correction1 = 1.0f - static_cast<float>(std::pow(static_cast<double>(h.beta1), t));
    const float correction2 = std::sqrt(1.0f - static_cast<float>(std::pow(static_cast<double>(h.beta2), t)));
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
        .step_size = (-h.lr * correction2) / correction1,
        .eps_term = correction2 * h.eps,
        .decay = 1.0f - h.lr * h.weight_decay,
    };
    a.moment[0].map = &dynamic_map(Q8MapKind::signed_map, config_.q8_semantics);
    a.moment[0].random_word = kWordFirstMoment;
    a.moment[1].map = &dynamic_map(Q8MapKind::unsigned_map, config_.q8_semantics);
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
  commit_zero_gate_skip(plan);
}

void StepPlanner::commit_zero_gate_skip(const Plan& plan) {
  if (config_.optimizer == reference::OptimizerKind::pa_cgad) counters_.last_sync[plan.fragment] = counters_.round;
}

std::vector<reference::StateCounter> StepPlanner::counters() const {
  std::vector<reference::StateCounter> out;
  if (adam_family()) out.push_back({"t", counters_.t});
  if (config_.optimizer == reference::OptimizerKind::pa_cgad) {
    std::vector<std::int64_t> ages(config_.fragments);
    for (std::size_t f = 0; f < ages.size(); ++f) ages[f] = age(f);
    out.push_back({"age", std::move(ages)});
  }
  return out;
}

void StepPlanner::set_raw_counters(Counters counters) {
  if (counters.t.size() != config_.fragments || counters.last_sync.size() != config_.fragments) {
    throw reference::InputError("state has counters for " + std::to_string(counters.t.size()) +
                                " fragments, the optimizer has " + std::to_string(config_.fragments));
  }
  if (counters.round < 0) throw reference::InputError("state has a negative round count");
  for (std::size_t f = 0; f < config_.fragments; ++f) {
    if (counters.t[f] < 0 || counters.last_sync[f] < -1 || counters.last_sync[f] > counters.round) {
      throw reference::InputError("state has an impossible step count or synchronization round in fragment " +
                                  std::to_string(f));
    }
  }
  counters_ = std::move(counters);
}

std::vector<std::string> StepPlanner::buffer_names() const {
  if (adam_family()) return {"m", "v"};
  return {"b"};
}

int StepPlanner::buffer_to_read(std::string_view name, std::size_t out_size) const {
  const std::vector<std::string> names = buffer_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) throw reference::InputError("no state buffer named '" + std::string(name) + "'");
  if (out_size != parameters()) {
    throw reference::InputError("buffer '" + std::string(name) + "' has " + std::to_string(parameters()) +
                                " elements, the output " + std::to_string(out_size));
  }
  return static_cast<int>(it - names.begin());
}

}  // namespace cgad::fastpath
