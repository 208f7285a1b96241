#pragma once
// cgad fast path: the production-precision outer step (docs/design.md §3, §5) — bf16 or fp32 parameters,
// fp32/bf16/q8 optimizer state, nearest or stochastic rounding — on the CPU (this header) and on CUDA
// (cuda_optimizer.hpp), computing the same bits.
//
// Public API, in five lines (everything else in this folder is how it works):
//
//   cgad::fastpath::StepConfig config;                 // optimizer, formats, rounding, seed, hyperparameters
//   config.optimizer = core::OptimizerKind::cgad;  // cgad, pa-cgad, adam-decay, adam, nesterov, sdm
//   config.params = ParamFormat::bf16; config.state = StateFormat::q8; config.rounding = Rounding::nearest;
//   cgad::fastpath::CpuOptimizer opt(config, n);        // state for n parameters; threads = 0 → all cores
//   CpuOptimizer opt(config, {n0, n1, ...});            // ... or for a sequence of tensors (q8 blocks restart at
//                                                       //   each; config.min_q8_size keeps small ones in fp32)
//   StepReport r = opt.step(std::span<bf16>(params), std::span<const float>(grad), tau, fragment);
//     // r.applied / r.reason (none, nonfinite-gradient, zero-gate) / r.nonfinite_index / r.tau_effective /
//     // r.sigma — the reference's StepReport<float>; params are updated in place (std::span<float> for fp32)
//   opt.advance_round();                                // PA-CGAD ages, once per outer round (as the reference)
//   opt.buffer_names();  opt.read_buffer("m", out);     // dequantized state as float ("m","v" or "b")
//   opt.counters();                                     // "t" per fragment (Adam family), "age" (PA-CGAD)
//   opt.save(path);  opt.load(path);                    // versioned, checksummed, atomic (state_file.hpp)
//   opt.save_bytes();  opt.load_bytes(bytes);            // the same format in memory (torch state_dict)
//   opt.step(std::span<float* const>(tensors), std::span<const float* const>(grads), tau);  // the caller's
//     // tensors where they lie, one pointer per tensor of the layout (torch parameters, in place)
//   opt.set_hyperparameters(config);                    // a new lr (a schedule), same formats and layout
//
// Semantics match the reference optimizers (reference::make_optimizer) event for event: the same argument
// checks (InputError), a NaN/Inf pseudo-gradient changes nothing (parameters, state, step counts, ages) and is
// reported with its first index, and so is one with |σ·Δ| ≥ 2^63 (the overflow rule, core/overflow_rule.hpp;
// for every optimizer: Nesterov's σ is 1, SDM's 1/(1 + τ)); on_zero_gate
// = skip drops a σ = 0 event. `grad` is the fragment's slice of
// the pseudo-gradient; `params` is always the whole vector. Empty tensors are fine; indices are 64-bit.
// The step allocates nothing: it reads and writes the caller's spans and the state made at construction.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/step_counters.hpp"
#include "cgad/fastpath/table_stepper.hpp"

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::fastpath {

namespace detail {
struct CpuOptimizerInternals;
}  // namespace detail

class CpuOptimizer {
 public:
  CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads = 0);
  CpuOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, unsigned threads = 0);
  // Movable, not copyable. A move keeps the state where it lies, so the spans tensor_state() gave out stay valid
  // (they follow the optimizer moved to); a moved-from one may only be destroyed or assigned to.
  CpuOptimizer(CpuOptimizer&&) noexcept;
  CpuOptimizer& operator=(CpuOptimizer&&) noexcept;
  ~CpuOptimizer();

  StepReport step(std::span<float> params, std::span<const float> grad, std::int64_t tau, std::size_t fragment = 0);
  StepReport step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau, std::size_t fragment = 0);

  // The same step over a table of the caller's tensors, where they lie (torch parameters, updated in place, no
  // copy): one entry per tensor of the layout (tensor_sizes()), params[k] pointing at tensor k's elements and
  // grads[k] at its whole pseudo-gradient, each contiguous. A PA-CGAD step reads and writes only the fragment's
  // part; a tensor with no element in the fragment (an empty one, for every step) may pass null. The chunks of a
  // step already restart at every tensor boundary (step_planner.hpp), so each chunk's operands lie in one tensor
  // and the result is bit for bit the contiguous step's over the concatenated tensors (proptests/
  // fastpath_tensor_table_test.cpp). r.nonfinite_index counts from the fragment's first element, as there.
  StepReport step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                  std::size_t fragment = 0);
  StepReport step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau,
                  std::size_t fragment = 0);
  // What the table step would report for this event, changing nothing: a caller stepping several optimizers for
  // one event (one per torch param group) refuses a NaN/Inf or overflowing pseudo-gradient in any of them before
  // any steps, so that such an event changes nothing anywhere.
  StepReport preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment = 0);
  void advance_round();

  // New hyperparameters (lr, betas, eps, weight decay, momentum, alpha, tau_cut, on_zero_gate) for the steps to
  // come, keeping the state and the counters: an lr schedule. The optimizer, formats, rounding, seed, q8
  // semantics, v map, min_q8_size and fragments must stay as they are (the state's shape and meaning depend on them);
  // InputError otherwise, or for invalid values, and then nothing changes.
  void set_hyperparameters(const StepConfig& config);

  const StepConfig& config() const;
  std::size_t parameters() const;
  unsigned threads() const;
  // The instruction set its block loops run (selected_cpu_isa() when it was made; the bits do not depend on it).
  CpuIsa isa() const;

  std::vector<std::string> buffer_names() const;
  // Writes the named buffer, dequantized to float, into `out` (parameters() elements); InputError otherwise.
  void read_buffer(std::string_view name, std::span<float> out) const;
  std::vector<core::StateCounter> counters() const;
  // Tensor k's slice of the live state, which its steps update in place and no step or load reallocates (valid as
  // long as the optimizer; InputError for a k outside the layout): the entry its own steps hand the stepper.
  TensorState tensor_state(std::size_t k);
  // The step counts, synchronizations and round as the state file stores them, and their restore (InputError, and
  // nothing changes, for impossible ones: StepPlanner::set_raw_counters).
  const StepCounters& raw_counters() const;
  void set_raw_counters(StepCounters counters);

  void save(const std::filesystem::path& path) const;
  // Refuses (InputError) a truncated, corrupt, other-version or other-configuration file; the state in memory
  // is untouched unless the whole file was accepted.
  void load(const std::filesystem::path& path);
  // The bytes save() writes, and their load (the same checks and refusals).
  std::vector<unsigned char> save_bytes() const;
  void load_bytes(std::span<const unsigned char> bytes);

  // The layout of the parameters: their fragments (PA-CGAD's P, else one) and tensors (one, for the contiguous
  // constructor). fragment_size(f) is what a step of fragment f takes as its pseudo-gradient (0 when there are no
  // parameters).
  const core::FragmentLayout& layout() const;
  std::size_t fragment_size(std::size_t fragment) const;
  const std::vector<std::size_t>& tensor_sizes() const;

 private:
  friend struct detail::CpuOptimizerInternals;  // the tests' view of the whole state
                                                // (detail/cpu_optimizer_internals.hpp)

  // Its stepper, host state and the entries over that state (cpu_optimizer.cpp), as CudaOptimizer holds its device
  // state: one pointer, so that this header includes no detail/ header. Each call costs one indirection more,
  // nothing per element.
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgad::fastpath
