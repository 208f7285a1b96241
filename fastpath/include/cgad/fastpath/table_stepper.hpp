#pragma once
// The CPU step over a table of the caller's tensors -- parameters, pseudo-gradients and optimizer state, each where
// it lies -- with no state of its own: a planner (layout, chunks, counters), a thread pool and the instruction set its
// block loops run. cgad.torch's CPU param groups step torch tensors through it (their state allocated by torch:
// docs/design.md §5, "Who owns the state"), and CpuOptimizer (fastpath.hpp) steps its own HostState through the same
// calls, so there is one step.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/detail/thread_pool.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace cgad::fastpath {

// One tensor's optimizer state: per moment (m, v; or b), the fp32 or bf16 values (one per element), or in a q8
// configuration the codes (one per element) and the absmax of each of the tensor's chunks -- or, for a tensor under
// min_q8_size (fp32_fallback), its fp32 moments in `fp32`. A step reads and writes exactly these; the caller owns
// them (TableStepper::entry makes one from buffer pointers; CpuOptimizer::tensor_state gives its own).
struct TensorState {
  int moments = 0;
  bool fp32_fallback = false;
  std::span<float> fp32[2];
  std::span<bf16> bf16_values[2];
  std::span<std::uint8_t> codes[2];
  std::span<float> absmax[2];
};

// What a tensor's state is made of: its kind ("fp32", "bf16", "q8" or "fp32-fallback"), the moments, and the
// lengths of each moment's buffers (values: elements of the values or codes; absmax: the q8 chunks, else 0).
struct TensorStateShape {
  std::string_view kind;
  int moments = 0;
  std::size_t values = 0;
  std::size_t absmax = 0;
  std::uint8_t initial_code[2] = {0, 0};  // q8: the code of each moment's all-zero state (HostState::zeros')
};

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
  // scanning Δ again; the caller guarantees Δ is unchanged. r.nonfinite_index counts from the fragment's first
  // element.
  StepReport step(std::span<float* const> params, std::span<const float* const> grads,
                  std::span<const TensorState> states, std::int64_t tau, std::size_t fragment = 0,
                  bool reuse_preview = false);
  StepReport step(std::span<bf16* const> params, std::span<const float* const> grads,
                  std::span<const TensorState> states, std::int64_t tau, std::size_t fragment = 0,
                  bool reuse_preview = false);
  // What step() would report for this event, changing nothing but what reuse_preview takes.
  StepReport preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment = 0);

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
  const StepConfig& config() const { return planner_.config(); }
  std::size_t parameters() const { return planner_.parameters(); }
  unsigned threads() const { return pool_->threads(); }
  CpuIsa isa() const { return isa_; }
  std::vector<core::StateCounter> counters() const { return planner_.counters(); }
  const StepCounters& raw_counters() const { return planner_.raw_counters(); }
  void set_raw_counters(StepCounters counters);
  const core::FragmentLayout& layout() const { return planner_.layout(); }
  std::size_t fragment_size(std::size_t fragment) const { return planner_.fragment_size(fragment); }
  const std::vector<std::size_t>& tensor_sizes() const { return planner_.tensor_sizes(); }
  const StepPlanner& planner() const { return planner_; }
  const std::vector<std::size_t>& tensor_begin() const { return tensor_begin_; }
  // Tensor k's first absmax slot (q8) or fallback moment (under min_q8_size) in buffers over the whole vector.
  std::size_t first_slot(std::size_t k) const { return first_slot_[k]; }

  // CpuOptimizer's contiguous step: θ the whole vector (params_fp32 or params_bf16, the other null), Δ the
  // fragment's slice, the state one entry per tensor.
  StepReport step_contiguous(float* params_fp32, bf16* params_bf16, std::size_t params_size,
                             std::span<const float> grad, std::span<const TensorState> states, std::int64_t tau,
                             std::size_t fragment);
  // The first and last tensor with elements in `fragment` (first > last when there are none).
  std::pair<std::size_t, std::size_t> touched(std::size_t fragment) const;

 private:
  // Where a step's chunks find Δ and θ (table_stepper.cpp).
  struct Operands;
  StepReport run(const Operands& operands, std::span<const TensorState> states, std::size_t params_size,
                 std::size_t grad_size, std::int64_t tau, std::size_t fragment, bool reuse_preview);
  std::pair<StepOutcome, std::uint64_t> scan(const Operands& operands, const StepPlanner::Plan& plan);
  void check_entries(std::span<const TensorState> states, const Operands& operands, std::size_t fragment) const;
  template <class P>
  StepReport table_step(std::span<P* const> params, std::span<const float* const> grads,
                        std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                        bool reuse_preview);

  StepPlanner planner_;
  std::shared_ptr<ThreadPool> pool_;
  CpuIsa isa_;
  std::vector<std::size_t> tensor_begin_;  // tensor k's first element; one entry more than tensors
  std::vector<std::size_t> chunk_tensor_;  // the tensor holding each chunk of planner_.chunks()
  std::vector<std::size_t> first_slot_;    // tensor k's first absmax or fallback slot (0 for a tensor of no chunk)
  std::vector<std::size_t> first_chunk_;   // tensor k's first chunk; one entry more than tensors
  // The last preview's event and outcome, and the counters' generation it saw (a commit, load, new round or new
  // hyperparameters moves the generation, so that reuse_preview then scans again).
  struct Previewed {
    std::uint64_t generation = 0;
    std::int64_t tau = 0;
    std::size_t fragment = 0;
    StepOutcome outcome = StepOutcome::applied;
    std::uint64_t index = 0;
    bool valid = false;
  };
  Previewed previewed_;
  std::uint64_t generation_ = 0;
};

}  // namespace cgad::fastpath
