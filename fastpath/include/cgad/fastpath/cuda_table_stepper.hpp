#pragma once
// The CUDA step over a table of the caller's device tensors -- parameters, pseudo-gradients and optimizer state,
// each where it lies -- with no state of its own: TableStepper's seam (table_stepper.hpp; the same TensorState per
// tensor, the same refusals), its counters, schedule and reports on the device. cgad.torch's CUDA param groups step
// torch tensors through it (their state allocated by torch on the parameter's device: docs/design.md §5, "Who owns
// the state"), and CudaOptimizer (cuda_optimizer.hpp) steps its own device buffers through the same launches.
//
//   CudaTableStepper s(config, tensor_sizes, stream);
//   std::uint64_t t = s.step(params, grads, states, tau, fragment, stream);   // enqueue, returns at once
//   CudaStepReport r = s.report(t, stream);                                   // waits for that step only
//
// A step is a handful of launches on the caller's stream (fastpath/src/cuda_kernels.hpp): the schedule (one thread:
// the step's constants from the counters on the device, step_schedule.hpp, the CPU backend's code), the NaN/Inf and
// overflow scan of Δ, the fused update (one CUDA block per 256-element chunk: agent/step_agent.hpp loads every
// operand, 4 wide where the chunk is full and aligned, runs the per-element update and stores; CUB BlockReduce for a
// q8 moment's new absmax, then requantization), which does nothing when the schedule skips the event or the scan
// refused it, and the commit (one thread: the outcome into the counters). The pointers travel in the launches'
// arguments, at most agent::kTableBatch tensors per launch, and each chunk finds its tensor through a chunk → tensor
// map made once (agent/tensor_batch.hpp): nothing is gathered or scattered, and nothing is copied to the device per
// step. Nothing in a step waits on the host, so steps and advance_round() can be captured in a CUDA graph: each
// replay steps again from the counters on the device, with the bits an uncaptured call would give.
//
// Several steppers stepping one event (one per torch param group) share a CudaEventVeto: each preview()s the event
// with it (schedule and refusal scan, a refusal sets the veto), then each step_previewed()s it (the update and the
// commit, which do nothing while the veto is set). An event refused in any of them changes none, decided on the
// device: no host sync between the halves or between events. Every step's report stays on the device, the last
// kReportHistory of them: step() returns a ticket and report(ticket) reads that step's report when asked.
//
// Streams: every call takes one (nullptr: the legacy default stream), the constructor's copies included, and is
// ordered after the stepper's previous call whatever stream that used (an event, waited for on the device). Work
// inside a stream capture is ordered by the graph: after launching a graph, pass its stream to the next call (or
// synchronize it). The calls that return host data (report, counters, raw_counters, set_raw_counters) wait for
// their stream and are refused inside a capture. The caller's tensors must stay allocated until the steps that read
// them have run (torch's caching allocator keeps a tensor's memory for its stream's work).
//
// Faults: the first CUDA call that fails (an asynchronous fault of a kernel surfaces at a later launch of the same
// step or at the next call, named as a failure of earlier work) makes the stepper unusable: that call and every later
// one throw std::runtime_error saying so, instead of an unrelated error one step later.
//
// Built only when CGAD_ENABLE_CUDA is on; otherwise every constructor throws InputError. Without a device,
// cuda_device_available() is false and the constructor throws InputError.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/step_counters.hpp"
#include "cgad/fastpath/table_stepper.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

struct CUstream_st;  // cudaStream_t is CUstream_st*; nullptr is the default stream

namespace cgad::fastpath {

// True when this build has the CUDA backend and the process sees at least one CUDA device.
bool cuda_device_available();
// Why not, in one line (for test skips); empty when available.
std::string cuda_unavailable_reason();

// One device word shared by the steppers that step one event (see above). Made on the current device.
class CudaEventVeto {
 public:
  explicit CudaEventVeto(CUstream_st* stream = nullptr);  // InputError without a CUDA device; cleared
  ~CudaEventVeto();
  CudaEventVeto(const CudaEventVeto&) = delete;
  CudaEventVeto& operator=(const CudaEventVeto&) = delete;
  // Clears it on `stream` (a memset node inside a capture), before an event's first preview; the event's previews
  // and steps then run on that stream, and finish(stream) follows them. reset() orders itself after the previous
  // event's finish() on whatever stream that ran (an event waited for on the device; inside a capture the graph
  // orders its nodes), so that no step of the previous event reads the word it clears.
  void reset(CUstream_st* stream);
  void finish(CUstream_st* stream);
  unsigned* device_word() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A step's report as the device recorded it: the stepper's own (its schedule, its scan's refusal) and whether a
// shared veto stopped it, in which case nothing changed here whatever `own` says.
struct CudaStepReport {
  StepReport own;
  bool vetoed = false;
};

class CudaOptimizer;

class CudaTableStepper {
 public:
  static constexpr std::uint64_t kReportHistory = 64;  // the step reports kept on the device for report(ticket)

  CudaTableStepper(const StepConfig& config, std::vector<std::size_t> tensor_sizes, CUstream_st* stream = nullptr);
  ~CudaTableStepper();
  CudaTableStepper(const CudaTableStepper&) = delete;
  CudaTableStepper& operator=(const CudaTableStepper&) = delete;

  // One event over the tensors of the layout, as TableStepper::step (the same tables, states and refusals; a tensor
  // whose gradient pointer is null is left out, nothing of it read or written), every pointer a device pointer.
  // Returns the step's ticket for report(ticket) (1 for the first step, then one more per step).
  std::uint64_t step(std::span<float* const> params, std::span<const float* const> grads,
                     std::span<const TensorState> states, std::int64_t tau, std::size_t fragment, CUstream_st* stream);
  std::uint64_t step(std::span<bf16* const> params, std::span<const float* const> grads,
                     std::span<const TensorState> states, std::int64_t tau, std::size_t fragment, CUstream_st* stream);
  // The step in two halves. preview() enqueues the event's schedule and refusal scan, changing nothing (as
  // TableStepper::preview, whose report report() then reads); with a veto, a NaN/Inf or overflow sets it.
  // step_previewed() enqueues the previewed event's update and commit, which do nothing while `veto` (null: none) is
  // set; InputError when no preview is pending. Both as step() for the tables.
  void preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment, CudaEventVeto* veto,
               CUstream_st* stream);
  std::uint64_t step_previewed(std::span<float* const> params, std::span<const float* const> grads,
                               std::span<const TensorState> states, const CudaEventVeto* veto, CUstream_st* stream);
  std::uint64_t step_previewed(std::span<bf16* const> params, std::span<const float* const> grads,
                               std::span<const TensorState> states, const CudaEventVeto* veto, CUstream_st* stream);
  // Waits for the last step (or preview) enqueued and returns its report (a default one before the first).
  StepReport report(CUstream_st* stream = nullptr);
  // Waits for step `ticket` and returns its report; InputError for a ticket not given yet, or one older than the
  // last kReportHistory steps (its slot was reused). Inside a replayed graph the captured step's slot holds the
  // latest replay's report.
  CudaStepReport report(std::uint64_t ticket, CUstream_st* stream = nullptr);
  std::uint64_t last_ticket() const;  // 0 before the first step
  void advance_round(CUstream_st* stream = nullptr);

  // As TableStepper's: tensor k's state shape, and a TensorState over (device) buffers of that shape.
  TensorStateShape shape(std::size_t k) const;
  TensorState entry(std::size_t k, std::span<void* const> buffers) const;

  const StepConfig& config() const;
  std::size_t parameters() const;
  const std::vector<std::size_t>& tensor_sizes() const;
  std::vector<core::StateCounter> counters(CUstream_st* stream = nullptr);
  // The counters as the state file holds them (waits for the last step), and their replacement (a loaded state:
  // ordered after the steps enqueued, waited for).
  StepCounters raw_counters(CUstream_st* stream = nullptr);
  void set_raw_counters(StepCounters counters, CUstream_st* stream = nullptr);
  // New hyperparameters for the steps to come, as TableStepper::set_hyperparameters (the same refusals:
  // require_same_state_layout; nothing changes on a refusal). The counters stay on the device. It does not wait,
  // except where PA-CGAD's table of σ(a) changes (a new alpha or tau_cut): that upload waits for it. Refused inside
  // a stream capture (the captured steps keep the constants they were captured with).
  void set_hyperparameters(const StepConfig& config, CUstream_st* stream = nullptr);

 private:
  friend class CudaOptimizer;  // its contiguous step and its state's transfers run in this stepper's order
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgad::fastpath
