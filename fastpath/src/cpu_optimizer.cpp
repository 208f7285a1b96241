#include "cgad/fastpath/fastpath.hpp"

#include "cgad/fastpath/state_file.hpp"
#include "cgad/reference/errors.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

namespace cgad::fastpath {
namespace {

// One block of the step (block_step.hpp): update every element, then requantize q8 moments with the
// block's new absmax. F fixes the formats at compile time (one instantiation per configuration).
template <class F>
void step_block(const StepArgs& a, std::uint64_t block) {
  const std::uint64_t begin = block * kQ8BlockSize;
  const std::uint64_t end = std::min<std::uint64_t>(begin + kQ8BlockSize, a.size);
  constexpr bool q8 = F::state(StepArgs{}) == StateCode::q8;
  constexpr int moments = F::family(StepArgs{}) == UpdateFamily::adam ? 2 : 1;
  float old_absmax[2] = {0.0f, 0.0f};
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) old_absmax[k] = a.moment[k].absmax[block];
  }
  float fresh[2][kQ8BlockSize];
  RandomWords random[kQ8BlockSize];
  for (std::uint64_t i = begin; i < end; ++i) {
    const std::uint64_t local = i - begin;
    random[local] = random_for<F>(a, i);
    float out[2];
    update_element<F>(a, i, a.grad[i], old_absmax, out, random[local]);
    for (int k = 0; k < moments; ++k) {
      if constexpr (q8) {
        fresh[k][local] = out[k];
      } else {
        store_moment_elementwise<F>(a, a.moment[k], i, out[k], random[local]);
      }
    }
  }
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) {
      float absmax = 0.0f;
      for (std::uint64_t local = 0; local < end - begin; ++local) absmax = absmax_step(absmax, fresh[k][local]);
      a.moment[k].absmax[block] = absmax;
      for (std::uint64_t local = 0; local < end - begin; ++local) {
        a.moment[k].codes[begin + local] = quantize_moment<F>(a, a.moment[k], fresh[k][local], absmax, random[local]);
      }
    }
  }
}

using BlockFunction = void (*)(const StepArgs&, std::uint64_t);

// The instantiation of step_block for the step's runtime formats.
template <UpdateFamily Family, ParamCode Params, StateCode State>
BlockFunction pick_rounding(bool stochastic) {
  return stochastic ? &step_block<FixedFormats<Family, Params, State, true>>
                    : &step_block<FixedFormats<Family, Params, State, false>>;
}
template <UpdateFamily Family, ParamCode Params>
BlockFunction pick_state(const StepArgs& a) {
  switch (a.state) {
    case StateCode::fp32: return pick_rounding<Family, Params, StateCode::fp32>(a.stochastic);
    case StateCode::bf16: return pick_rounding<Family, Params, StateCode::bf16>(a.stochastic);
    case StateCode::q8: return pick_rounding<Family, Params, StateCode::q8>(a.stochastic);
  }
  return nullptr;
}
template <UpdateFamily Family>
BlockFunction pick_params(const StepArgs& a) {
  return a.params == ParamCode::fp32 ? pick_state<Family, ParamCode::fp32>(a) : pick_state<Family, ParamCode::bf16>(a);
}
BlockFunction block_function_for(const StepArgs& a) {
  return a.family == UpdateFamily::adam ? pick_params<UpdateFamily::adam>(a) : pick_params<UpdateFamily::nesterov>(a);
}

}  // namespace

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads)
    : planner_(config, parameters), state_(HostState::zeros(planner_)), pool_(threads) {}

StepReport CpuOptimizer::step(std::span<float> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw reference::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  return run(params.size(), params.data(), nullptr, grad, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw reference::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  return run(params.size(), nullptr, params.data(), grad, tau, fragment);
}

StepReport CpuOptimizer::run(std::size_t params_size, float* params_fp32, bf16* params_bf16,
                             std::span<const float> grad, std::int64_t tau, std::size_t fragment) {
  StepPlanner::Plan plan = planner_.plan(params_size, grad.size(), tau, fragment);
  // The NaN/Inf check comes first, as in the reference's apply(): such an event is reported as nonfinite
  // even when the gate would have skipped it.
  std::atomic<std::uint64_t> first_bad{std::numeric_limits<std::uint64_t>::max()};
  pool_.parallel_for(grad.size(), [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) {
      if (!std::isfinite(grad[i])) {
        std::uint64_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
        return;
      }
    }
  });
  if (first_bad.load() != std::numeric_limits<std::uint64_t>::max()) {
    StepReport report;
    report.applied = false;
    report.reason = reference::SkipReason::nonfinite_gradient;
    report.nonfinite_index = first_bad.load();
    report.tau_effective = tau;
    report.sigma = 0.0f;
    return report;
  }
  if (!plan.report.applied) return plan.report;

  state_.bind(plan);
  plan.args.grad = grad.data();
  plan.args.params_fp32 = params_fp32 == nullptr ? nullptr : params_fp32 + plan.offset;
  plan.args.params_bf16 = params_bf16 == nullptr ? nullptr : params_bf16 + plan.offset;
  const StepArgs& args = plan.args;
  const BlockFunction step_one = block_function_for(args);
  pool_.parallel_for(block_count(args.size), [&args, step_one](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t block = begin; block < end; ++block) step_one(args, block);
  });
  planner_.commit(plan);
  return plan.report;
}

std::vector<std::string> CpuOptimizer::buffer_names() const {
  if (planner_.adam_family()) return {"m", "v"};
  return {"b"};
}

void CpuOptimizer::read_buffer(std::string_view name, std::span<float> out) const {
  const auto names = buffer_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) throw reference::InputError("no state buffer named '" + std::string(name) + "'");
  if (out.size() != parameters()) {
    throw reference::InputError("buffer '" + std::string(name) + "' has " + std::to_string(parameters()) +
                                " elements, the output " + std::to_string(out.size()));
  }
  state_.read(planner_, static_cast<int>(it - names.begin()), out);
}

void CpuOptimizer::save(const std::filesystem::path& path) const {
  write_state_file(path, planner_, state_);
}

void CpuOptimizer::load(const std::filesystem::path& path) {
  LoadedState loaded = read_state_file(path, planner_, state_);
  planner_.set_raw_counters(std::move(loaded.counters));
  state_ = std::move(loaded.state);
}

}  // namespace cgad::fastpath
