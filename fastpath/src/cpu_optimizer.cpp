#include "cgad/fastpath/fastpath.hpp"

#include "cgad/fastpath/state_file.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/tensor_table.hpp"

#include <algorithm>
#include <memory>

namespace cgad::fastpath {
namespace {

// Tensor k's entry over a HostState's buffers: its values from its first element, its absmax (q8) or fallback
// moments (a q8 configuration's tensor under min_q8_size) from its first chunk's slot.
TensorState entry_of(HostState& state, const TableStepper& stepper, std::size_t k) {
  const TensorStateShape shape = stepper.shape(k);
  const std::size_t begin = stepper.tensor_begin()[k];
  const std::size_t slot = stepper.first_slot(k);
  std::vector<void*> buffers(2 * static_cast<std::size_t>(shape.moments), nullptr);
  for (int m = 0; m < shape.moments; ++m) {
    switch (state.format) {
      case StateFormat::fp32:
        buffers[2 * m] = state.fp32[m].data() + begin;
        break;
      case StateFormat::bf16:
        buffers[2 * m] = state.bf16_values[m].data() + begin;
        break;
      case StateFormat::q8:
        if (shape.kind == "fp32-fallback") {
          buffers[2 * m] = state.fp32[m].data() + slot;
        } else {
          buffers[2 * m] = state.codes[m].data() + begin;
          buffers[2 * m + 1] = state.absmax[m].data() + slot;
        }
        break;
    }
  }
  return stepper.entry(k, buffers);
}

}  // namespace

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads)
    : CpuOptimizer(config, std::vector<std::size_t>{parameters}, threads) {}

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, unsigned threads)
    : stepper_(config, std::move(tensor_sizes), std::make_shared<ThreadPool>(threads)),
      state_(HostState::zeros(stepper_.planner())) {
  for (std::size_t k = 0; k < stepper_.tensor_sizes().size(); ++k) entries_.push_back(entry_of(state_, stepper_, k));
}

StepReport CpuOptimizer::step(std::span<float> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  return stepper_.step_contiguous(params.data(), nullptr, params.size(), grad, entries_, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  return stepper_.step_contiguous(nullptr, params.data(), params.size(), grad, entries_, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  check_full_table(params, grads, stepper_.tensor_sizes(), stepper_.touched(fragment));
  return stepper_.step(params, grads, entries_, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  check_full_table(params, grads, stepper_.tensor_sizes(), stepper_.touched(fragment));
  return stepper_.step(params, grads, entries_, tau, fragment);
}

StepReport CpuOptimizer::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment) {
  const auto [first, last] = stepper_.touched(fragment);
  check_table("gradient", grads, stepper_.tensor_sizes().size(), first, last, stepper_.tensor_sizes());
  return stepper_.preview(grads, tau, fragment);
}

std::vector<std::string> CpuOptimizer::buffer_names() const {
  return stepper_.planner().buffer_names();
}

void CpuOptimizer::read_buffer(std::string_view name, std::span<float> out) const {
  state_.read(stepper_.planner(), stepper_.planner().buffer_to_read(name, out.size()), out);
}

void CpuOptimizer::set_hyperparameters(const StepConfig& config) {
  stepper_.set_hyperparameters(config);
}

void CpuOptimizer::save(const std::filesystem::path& path) const {
  write_state_file(path, stepper_.planner(), state_);
}

void CpuOptimizer::load(const std::filesystem::path& path) {
  adopt(read_state_file(path, stepper_.planner(), state_));
}

std::vector<unsigned char> CpuOptimizer::save_bytes() const {
  return state_bytes(stepper_.planner(), state_);
}

void CpuOptimizer::load_bytes(std::span<const unsigned char> bytes) {
  adopt(parse_state_bytes(bytes, "the fast-path state", stepper_.planner(), state_));
}

TensorState CpuOptimizer::tensor_state(std::size_t k) {
  if (k >= entries_.size()) {
    throw core::InputError("tensor " + std::to_string(k) + " does not exist (there are " +
                           std::to_string(entries_.size()) + ")");
  }
  return entries_[k];
}

void CpuOptimizer::adopt(LoadedState&& loaded) {
  stepper_.set_raw_counters(std::move(loaded.counters));
  // Into the buffers there are (the loaded state has their shape: parse_state_bytes), so that the entries and the
  // spans tensor_state() gave out stay valid.
  for (int m = 0; m < 2; ++m) {
    std::copy(loaded.state.fp32[m].begin(), loaded.state.fp32[m].end(), state_.fp32[m].begin());
    std::copy(loaded.state.bf16_values[m].begin(), loaded.state.bf16_values[m].end(), state_.bf16_values[m].begin());
    std::copy(loaded.state.codes[m].begin(), loaded.state.codes[m].end(), state_.codes[m].begin());
    std::copy(loaded.state.absmax[m].begin(), loaded.state.absmax[m].end(), state_.absmax[m].begin());
  }
}

}  // namespace cgad::fastpath
