#include "cgad/fastpath/fastpath.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"
#include "cgad/fastpath/detail/host_state.hpp"
#include "cgad/fastpath/detail/table_stepper_internals.hpp"
#include "cgad/fastpath/detail/tensor_table.hpp"
#include "cgad/fastpath/thread_pool.hpp"

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

// Its own state, stepped through the same table step as a caller's (table_stepper.hpp): one entry per tensor over
// state's buffers, made once (no step or load reallocates them).
struct CpuOptimizer::Impl {
  Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes, unsigned threads)
      : stepper(config, std::move(tensor_sizes), std::make_shared<ThreadPool>(threads)),
        state(HostState::zeros(planner())) {
    for (std::size_t k = 0; k < stepper.tensor_sizes().size(); ++k) entries.push_back(entry_of(state, stepper, k));
  }
  const StepPlanner& planner() const { return detail::TableStepperInternals::planner(stepper); }
  void adopt(LoadedState&& loaded);

  TableStepper stepper;
  HostState state;
  std::vector<TensorState> entries;
};

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads)
    : CpuOptimizer(config, std::vector<std::size_t>{parameters}, threads) {}

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, unsigned threads)
    : impl_(std::make_unique<Impl>(config, std::move(tensor_sizes), threads)) {}

CpuOptimizer::CpuOptimizer(CpuOptimizer&&) noexcept = default;
CpuOptimizer& CpuOptimizer::operator=(CpuOptimizer&&) noexcept = default;
CpuOptimizer::~CpuOptimizer() = default;

StepReport CpuOptimizer::step(std::span<float> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  return impl_->stepper.step_contiguous(params.data(), nullptr, params.size(), grad, impl_->entries, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  return impl_->stepper.step_contiguous(nullptr, params.data(), params.size(), grad, impl_->entries, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  check_full_table(params, grads, impl_->stepper.tensor_sizes(), impl_->stepper.touched(fragment));
  return impl_->stepper.step(params, grads, impl_->entries, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  check_full_table(params, grads, impl_->stepper.tensor_sizes(), impl_->stepper.touched(fragment));
  return impl_->stepper.step(params, grads, impl_->entries, tau, fragment);
}

StepReport CpuOptimizer::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment) {
  const auto [first, last] = impl_->stepper.touched(fragment);
  check_table("gradient", grads, impl_->stepper.tensor_sizes().size(), first, last, impl_->stepper.tensor_sizes());
  return impl_->stepper.preview(grads, tau, fragment);
}

std::vector<std::string> CpuOptimizer::buffer_names() const {
  return impl_->planner().buffer_names();
}

void CpuOptimizer::read_buffer(std::string_view name, std::span<float> out) const {
  impl_->state.read(impl_->planner(), impl_->planner().buffer_to_read(name, out.size()), out);
}

void CpuOptimizer::set_hyperparameters(const StepConfig& config) {
  impl_->stepper.set_hyperparameters(config);
}

void CpuOptimizer::save(const std::filesystem::path& path) const {
  write_state_file(path, impl_->planner(), impl_->state);
}

void CpuOptimizer::load(const std::filesystem::path& path) {
  impl_->adopt(read_state_file(path, impl_->planner(), impl_->state));
}

std::vector<unsigned char> CpuOptimizer::save_bytes() const {
  return state_bytes(impl_->planner(), impl_->state);
}

void CpuOptimizer::load_bytes(std::span<const unsigned char> bytes) {
  impl_->adopt(parse_state_bytes(bytes, "the fast-path state", impl_->planner(), impl_->state));
}

TensorState CpuOptimizer::tensor_state(std::size_t k) {
  if (k >= impl_->entries.size()) {
    throw core::InputError("tensor " + std::to_string(k) + " does not exist (there are " +
                           std::to_string(impl_->entries.size()) + ")");
  }
  return impl_->entries[k];
}

void CpuOptimizer::Impl::adopt(LoadedState&& loaded) {
  stepper.set_raw_counters(std::move(loaded.counters));
  // Into the buffers there are (the loaded state has their shape: parse_state_bytes), so that the entries and the
  // spans tensor_state() gave out stay valid.
  for (int m = 0; m < 2; ++m) {
    std::copy(loaded.state.fp32[m].begin(), loaded.state.fp32[m].end(), state.fp32[m].begin());
    std::copy(loaded.state.bf16_values[m].begin(), loaded.state.bf16_values[m].end(), state.bf16_values[m].begin());
    std::copy(loaded.state.codes[m].begin(), loaded.state.codes[m].end(), state.codes[m].begin());
    std::copy(loaded.state.absmax[m].begin(), loaded.state.absmax[m].end(), state.absmax[m].begin());
  }
}

void CpuOptimizer::advance_round() {
  impl_->stepper.advance_round();
}
const StepConfig& CpuOptimizer::config() const {
  return impl_->stepper.config();
}
std::size_t CpuOptimizer::parameters() const {
  return impl_->stepper.parameters();
}
unsigned CpuOptimizer::threads() const {
  return impl_->stepper.threads();
}
CpuIsa CpuOptimizer::isa() const {
  return impl_->stepper.isa();
}
std::vector<core::StateCounter> CpuOptimizer::counters() const {
  return impl_->stepper.counters();
}
const StepCounters& CpuOptimizer::raw_counters() const {
  return impl_->stepper.raw_counters();
}
void CpuOptimizer::set_raw_counters(StepCounters counters) {
  impl_->stepper.set_raw_counters(std::move(counters));
}
const core::FragmentLayout& CpuOptimizer::layout() const {
  return impl_->stepper.layout();
}
std::size_t CpuOptimizer::fragment_size(std::size_t fragment) const {
  return impl_->stepper.fragment_size(fragment);
}
const std::vector<std::size_t>& CpuOptimizer::tensor_sizes() const {
  return impl_->stepper.tensor_sizes();
}

const HostState& detail::CpuOptimizerInternals::state(const CpuOptimizer& optimizer) {
  return optimizer.impl_->state;
}
const StepPlanner& detail::CpuOptimizerInternals::planner(const CpuOptimizer& optimizer) {
  return optimizer.impl_->planner();
}

}  // namespace cgad::fastpath
