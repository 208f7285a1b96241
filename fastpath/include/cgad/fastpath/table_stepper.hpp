#pragma once
// The CPU step over a table of the caller's tensors -- parameters, pseudo-gradients and optimizer state, each where
// it lies -- with no state of its own: a planner (layout, chunks, counters), a thread pool and the instruction set its
// block loops run. cgad.torch's CPU param groups step torch tensors through it (their state allocated by torch:
// docs/design.md §5, "Who owns the state"), and CpuOptimizer (fastpath.hpp) steps its own HostState through the same
// calls, so there is one step.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/step_counters.hpp"
#include "cgad/fastpath/tensor_state.hpp"
#include "cgad/core/fragments.hpp"
#include "cgad/core/step_report.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace cgad::fastpath {

class ThreadPool;  // thread_pool.hpp: made by whoever shares it among steppers (cgad's Python module, the tests)

namespace detail {
struct TableStepperInternals;
}  // namespace detail

// Refuses (InputError) new hyperparameters `next` for an optimizer configured as `now` unless they keep what its
// state's shape and meaning depend on: the optimizer, formats, rounding, seed, q8 semantics, v map, q8 maps,
// min_q8_size and fragments (set_hyperparameters of either backend).
void require_same_state_layout(const StepConfig& now, const StepConfig& next);

class TableStepper {
 public:
  // `pool` may be shared by several steppers (one torch optimizer's param groups): their steps take turns on it.
  TableStepper(const StepConfig& config, std::vector<std::size_t> tensor_sizes, std::shared_ptr<ThreadPool> pool);

  // One event over the tensors of the layout: params[k] and grads[k] tensor k's elements and whole pseudo-gradient,
  // states[k] its state (each contiguous). A tensor whose gradient pointer is null is left out: nothing of it is
  // read or written (its parameters and state stay as they are), as torch.optim skips a parameter without .grad;
  // the others are stepped as one event (one count). A step whose every touched tensor is left out is refused
  // (InputError). Bit for bit the contiguous step's over the concatenated tensors where none is left out
  // (proptests/fastpath_tensor_table_test.cpp), since no chunk crosses a tensor. reuse_preview: take the outcome of
  // the last preview() of this event (same τ and fragment, nothing stepped, loaded or reconfigured since) instead of
  // scanning Δ again -- or, where none applies, the last form_pseudo_gradient()'s look at the Δ it wrote (below);
  // the caller guarantees Δ is unchanged. r.nonfinite_index counts from the fragment's first element.
  StepReport step(std::span<float* const> params, std::span<const float* const> grads,
                  std::span<const TensorState> states, std::int64_t tau, std::size_t fragment = 0,
                  bool reuse_preview = false);
  StepReport step(std::span<bf16* const> params, std::span<const float* const> grads,
                  std::span<const TensorState> states, std::int64_t tau, std::size_t fragment = 0,
                  bool reuse_preview = false);
  // What step() would report for this event, changing nothing but what reuse_preview takes.
  StepReport preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment = 0);
  // Writes deltas[k] = start[k] − params[k] (fp32 parameters; IEEE subtraction, element by element) for every
  // tensor whose start pointer is not null, and records in the same pass whether any Δ is NaN or ±Inf and the
  // largest |Δ| (docs/design.md §5, "Δ checked where it is formed"). The next step given these Δ pointers with
  // reuse_preview skips its scan when that record shows nothing the event could refuse at its σ (the overflow rule
  // is monotone in |Δ|); otherwise it scans as for a raw Δ. Any step, load or reconfiguration ends the record.
  // InputError for tables of the wrong length, a null pointer of a formed tensor, or bf16 parameters.
  void form_pseudo_gradient(std::span<const float* const> start, std::span<const float* const> params,
                            std::span<float* const> deltas);

  // Tensor k's state shape, and a TensorState over buffers of that shape: buffers[2·m] is moment m's values (fp32,
  // bf16 or the q8 codes) and buffers[2·m + 1] its absmax (q8 only; ignored otherwise). InputError for a k outside
  // the layout or a null buffer of a non-empty length.
  TensorStateShape shape(std::size_t k) const;
  TensorState entry(std::size_t k, std::span<void* const> buffers) const;
  // Refuses (InputError, naming tensor k and the element) a set of per-tensor states of the wrong shape or holding
  // a state no run of steps reaches -- what the state file's loader refuses (fastpath/src/state_file.cpp: finite,
  // in range, m bounded by v) -- reading them where they lie; `which` says which tensors to check (all if empty).
  void check_states(std::span<const TensorState> states, std::span<const std::size_t> which = {}) const;
  // Tensor k's moment `moment` dequantized to float (its size() elements).
  void read_state(const TensorState& state, std::size_t k, int moment, std::span<float> out) const;

  void advance_round();
  // As CpuOptimizer::set_hyperparameters.
  void set_hyperparameters(const StepConfig& config);
  const StepConfig& config() const;
  std::size_t parameters() const;
  unsigned threads() const;
  CpuIsa isa() const;
  std::vector<core::StateCounter> counters() const;
  const StepCounters& raw_counters() const;
  void set_raw_counters(StepCounters counters);
  const core::FragmentLayout& layout() const;
  std::size_t fragment_size(std::size_t fragment) const;
  const std::vector<std::size_t>& tensor_sizes() const;
  const std::vector<std::size_t>& tensor_begin() const;
  // Tensor k's first absmax slot (q8) or fallback moment (under min_q8_size) in buffers over the whole vector.
  std::size_t first_slot(std::size_t k) const;

  // CpuOptimizer's contiguous step: θ the whole vector (params_fp32 or params_bf16, the other null), Δ the
  // fragment's slice, the state one entry per tensor.
  StepReport step_contiguous(float* params_fp32, bf16* params_bf16, std::size_t params_size,
                             std::span<const float> grad, std::span<const TensorState> states, std::int64_t tau,
                             std::size_t fragment);
  // The first and last tensor with elements in `fragment` (first > last when there are none).
  std::pair<std::size_t, std::size_t> touched(std::size_t fragment) const;

  ~TableStepper();
  TableStepper(TableStepper&&) noexcept;
  TableStepper& operator=(TableStepper&&) noexcept;

 private:
  friend struct detail::TableStepperInternals;  // its planner, for CpuOptimizer's state file and the tests
                                                // (detail/table_stepper_internals.hpp)

  // The planner (layout, chunks, counters), the pool and the chunk tables, in table_stepper.cpp: one pointer, so
  // that this header includes no detail/ header. Each call costs one indirection more; nothing per element.
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgad::fastpath
