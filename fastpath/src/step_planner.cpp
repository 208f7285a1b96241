#include "cgad/fastpath/detail/step_planner.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/event_check.hpp"

#include <algorithm>
#include <limits>
#include <string>

namespace cgad::fastpath {

namespace {

std::size_t checked_sum(const std::vector<std::size_t>& sizes) {
  std::size_t total = 0;
  for (const std::size_t size : sizes) {
    if (size > std::numeric_limits<std::size_t>::max() - total) {
      throw core::InputError("tensor sizes overflow a 64-bit parameter count");
    }
    total += size;
  }
  return total;
}

// FragmentLayout refuses empty fragments; zero parameters in one fragment are fine here (one empty fragment),
// so the layout is then built over one element and every size below uses the real count.
core::FragmentLayout layout_over(std::size_t parameters, std::size_t fragments) {
  return parameters == 0 && fragments == 1 ? core::FragmentLayout(1, 1) : core::FragmentLayout(parameters, fragments);
}

}  // namespace

StepPlanner::StepPlanner(const StepConfig& config, std::size_t parameters)
    : StepPlanner(config, std::vector<std::size_t>{parameters}) {}

StepPlanner::StepPlanner(const StepConfig& config, std::vector<std::size_t> tensor_sizes)
    : config_((validate(config), config)),
      gate_(long_double_gate(config)),
      betas_(beta_constants(config)),
      maps_(config),
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
  // The ages whose γ is not 0 are those below τ_cut (gate.hpp); validate() bounds τ_cut for PA-CGAD.
  if (config.optimizer == core::OptimizerKind::pa_cgad) {
    for (std::int64_t age = 0; !gate_is_zero(gate_, age); ++age) age_sigma_.push_back(gate_sigma(gate_, age));
  }
}

std::int64_t StepPlanner::age(std::size_t fragment) const {
  return fragment_age(values(), fragment);
}

CounterValues StepPlanner::values() const {
  return {counters_.t.data(), counters_.last_sync.data(), counters_.round, counters_.steps};
}

StepPlanner::Plan StepPlanner::prepare(std::size_t params_size, std::size_t grad_size, std::int64_t tau,
                                       std::size_t fragment) const {
  // An optimizer of no parameters holds one empty fragment (layout_over).
  const auto fragment_size = [this](std::size_t f) { return empty_ ? std::size_t{0} : layout_.size(f); };
  core::check_event(params_size, grad_size, tau, fragment, empty_ ? 0 : layout_.parameters(), config_.fragments,
                    fragment_size);
  const std::size_t size = fragment_size(fragment);

  Plan plan;
  plan.fragment = fragment;
  plan.offset = empty_ ? 0 : layout_.offset(fragment);
  StepEvent& e = plan.event;
  e.tau = tau;
  e.fragment = fragment;
  StepArgs& a = plan.args;
  a.params = config_.params;
  a.state = config_.state;
  a.stochastic = config_.rounding == Rounding::stochastic;
  a.bnb = config_.q8_semantics == Q8Semantics::bnb;
  a.moments = moments();
  a.seed = config_.seed;
  a.first_index = plan.offset;
  a.size = size;
  if (adam_family()) {
    e.sigma_tau = gate_sigma(gate_, tau);
    // `skip` drops an event whose gate is zero (γ = 0, the cosine gate at τ ≥ τ_cut), exactly as the reference
    // decides it; a σ that only rounds to 0 in float (Adam-Decay past ατ ≈ 104) is applied.
    e.zero_gate_tau = config_.on_zero_gate == core::ZeroGatePolicy::skip && gate_is_zero(gate_, tau);
    a.family = UpdateFamily::adam;
    a.moment[0].map = &q8_map(0);
    a.moment[0].random_word = kWordFirstMoment;
    a.moment[1].map = &q8_map(1);
    a.moment[1].random_word = kWordSecondMoment;
  } else {
    // SDM: Δ scaled by 1/(1 + τ) (reference/detail/nesterov.hpp); Nesterov is staleness-blind.
    e.sigma_tau = config_.optimizer == core::OptimizerKind::sdm ? sdm_scale(tau) : 1.0f;
    a.family = UpdateFamily::nesterov;
    a.moment[0].map = &q8_map(0);  // the signed map; validate() keeps the Nesterov family on cgad semantics
    a.moment[0].random_word = kWordFirstMoment;
  }
  return plan;
}

StepPlanner::Plan StepPlanner::plan(std::size_t params_size, std::size_t grad_size, std::int64_t tau,
                                    std::size_t fragment) const {
  Plan plan = prepare(params_size, grad_size, tau, fragment);
  plan.scheduled = schedule_step(schedule_constants(), values(), plan.event);
  apply_schedule(plan.args, plan.scheduled);
  return plan;
}

void StepPlanner::commit(const Plan& plan, StepOutcome outcome) {
  const CounterView view{counters_.t.data(), counters_.last_sync.data(), &counters_.round, &counters_.steps};
  commit_step(schedule_constants(), view, plan.fragment, outcome);
}

StepReport StepPlanner::report_of(const StepEvent& event, const ScheduledStep& scheduled, StepOutcome outcome,
                                  std::uint64_t index) {
  StepReport report;
  report.tau_effective = scheduled.tau_effective;
  report.sigma = scheduled.sigma;
  switch (outcome) {
    case StepOutcome::applied:
      break;
    case StepOutcome::zero_gate:
      report.applied = false;
      report.reason = core::SkipReason::zero_gate;
      break;
    case StepOutcome::nonfinite:
      report.applied = false;
      report.reason = core::SkipReason::nonfinite_gradient;
      report.nonfinite_index = static_cast<std::size_t>(index);
      report.tau_effective = event.tau;  // as the reference: such an event never reaches the gate
      report.sigma = 0.0f;
      break;
    case StepOutcome::overflow:
      report.applied = false;
      report.reason = core::SkipReason::overflowing_gradient;
      report.nonfinite_index = static_cast<std::size_t>(index);
      break;
  }
  return report;
}

ScheduleConstants StepPlanner::schedule_constants() const {
  ScheduleConstants c;
  c.family = adam_family() ? UpdateFamily::adam : UpdateFamily::nesterov;
  c.ages = config_.optimizer == core::OptimizerKind::pa_cgad;
  c.skip_zero_gate = config_.on_zero_gate == core::ZeroGatePolicy::skip;
  const auto& h = config_.adam;
  c.lr = h.lr;
  c.beta1 = h.beta1;
  c.beta2 = h.beta2;
  c.eps = h.eps;
  c.weight_decay = h.weight_decay;
  c.one_minus_beta1 = betas_.one_minus_beta1;
  c.one_minus_beta2 = betas_.one_minus_beta2;
  c.base1_hi = betas_.base1_hi;
  c.base1_lo = betas_.base1_lo;
  c.base2_hi = betas_.base2_hi;
  c.base2_lo = betas_.base2_lo;
  c.momentum = config_.nesterov.momentum;
  c.nesterov_lr = config_.nesterov.lr;
  c.age_sigma = age_sigma_.data();
  c.age_sigma_size = age_sigma_.size();
  return c;
}

std::vector<core::StateCounter> StepPlanner::counters() const {
  std::vector<core::StateCounter> out;
  if (adam_family()) out.push_back({"t", counters_.t});
  if (config_.optimizer == core::OptimizerKind::pa_cgad) {
    std::vector<std::int64_t> ages(config_.fragments);
    for (std::size_t f = 0; f < ages.size(); ++f) ages[f] = age(f);
    out.push_back({"age", std::move(ages)});
  }
  return out;
}

void StepPlanner::set_raw_counters(Counters counters) {
  if (counters.t.size() != config_.fragments || counters.last_sync.size() != config_.fragments) {
    throw core::InputError("state has counters for " + std::to_string(counters.t.size()) +
                           " fragments, the optimizer has " + std::to_string(config_.fragments));
  }
  // No run reaches 2^62 steps or rounds; the bound keeps t + 1, round + 1 and the ages from overflowing.
  constexpr std::int64_t kMaxCount = std::int64_t{1} << 62;
  if (counters.round < 0 || counters.round >= kMaxCount) {
    throw core::InputError("state has an impossible round count " + std::to_string(counters.round));
  }
  if (counters.steps >= static_cast<std::uint64_t>(kMaxCount)) {
    throw core::InputError("state has an impossible step count " + std::to_string(counters.steps));
  }
  for (std::size_t f = 0; f < config_.fragments; ++f) {
    if (counters.t[f] < 0 || counters.t[f] >= kMaxCount || counters.last_sync[f] < -1 ||
        counters.last_sync[f] > counters.round) {
      throw core::InputError("state has an impossible step count or synchronization round in fragment " +
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
  if (it == names.end()) throw core::InputError("no state buffer named '" + std::string(name) + "'");
  if (out_size != parameters()) {
    throw core::InputError("buffer '" + std::string(name) + "' has " + std::to_string(parameters()) +
                           " elements, the output " + std::to_string(out_size));
  }
  return static_cast<int>(it - names.begin());
}

}  // namespace cgad::fastpath
