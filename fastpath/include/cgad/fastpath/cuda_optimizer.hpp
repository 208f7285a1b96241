#pragma once
// The CUDA backend: the same optimizer as CpuOptimizer, its state in device memory, computing the same bits
// (both call block_step.hpp's per-element functions; the kernel is built with --fmad=false and IEEE division
// and sqrt, the host with -ffp-contract=off).
//
//   CudaOptimizer opt(config, n, stream);                    // device state for n parameters
//   opt.step(params_dev, n, grad_dev, fragment_size, tau, fragment, stream);   // enqueue, returns at once
//   StepReport r = opt.report(stream);                       // waits for the last step, tells if it applied
//   opt.set_hyperparameters(next, stream);                   // an lr schedule: no wait, the counters stay
//   opt.save_bytes(stream);  opt.load_bytes(bytes, stream);  // the state file's bytes (state_file.hpp)
//
// The same seam as CpuOptimizer (fastpath.hpp): step over a table of tensors, preview, set_hyperparameters,
// save_bytes/load_bytes, counters; a state saved by either backend loads into the other.
//
// Several optimizers stepping one event (one per torch param group) share a CudaEventVeto: each preview()s the event
// with it (schedule and refusal scan, a refusal sets the veto), then each step_previewed()s it (the update and the
// commit, which do nothing while the veto is set). An event refused in any of them changes none, decided on the
// device: no host sync between the halves or between events, so such a step can be captured in a CUDA graph too.
// Every step's report stays on the device, the last kReportHistory of them: step() returns a ticket and
// report(ticket) reads that step's report when asked (it waits for it), so a caller can read reports lazily.
//
// A step is four launches on the caller's stream (fastpath/src/cuda_kernels.hpp): the schedule (one thread: the
// step's constants from the counters, which live on the device: t per fragment, PA-CGAD's synchronization rounds,
// the round, the step count — step_schedule.hpp, the CPU backend's code), a grid-wide NaN/Inf and overflow scan of
// the pseudo-gradient, the fused update (one CUDA block per 256-element chunk: agent/step_agent.hpp loads every
// operand, 4 wide where the chunk is full and aligned, runs the per-element update and stores; CUB BlockReduce for
// a q8 moment's new absmax, then requantization), which does nothing when the schedule skips the event or the scan
// refused it, and the commit (one thread: the outcome into the counters). Nothing in a step waits on the host, and
// steps and advance_round() can be captured in a CUDA graph: each replay steps again from the counters on the
// device, with the bits an uncaptured call would give.
//
// Streams: every call takes one (nullptr: the legacy default stream), the constructor's and load()'s copies
// included, and is ordered after the optimizer's previous call whatever stream that used (an event, waited for on
// the device). Work inside a stream capture is ordered by the graph: after launching a graph, pass its stream to
// the next call (or synchronize it). The calls that return host data (report, counters, download, read_buffer,
// save, load) wait for their stream and are refused inside a capture.
//
// Faults: the first CUDA call that fails (an asynchronous fault of a kernel surfaces at a later launch of the same
// step or at the next call, named as a failure of earlier work) makes the optimizer unusable: that call and every later
// one throw std::runtime_error saying so, instead of an unrelated error one step later. Its device state is then lost;
// a saved state loads into a new optimizer.
//
// Built only when CGAD_ENABLE_CUDA is on; otherwise every constructor throws InputError. Without a device,
// cuda_device_available() is false and the constructor throws InputError.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/detail/host_state.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct CUstream_st;  // cudaStream_t is CUstream_st*; nullptr is the default stream

namespace cgad::fastpath {

// True when this build has the CUDA backend and the process sees at least one CUDA device.
bool cuda_device_available();
// Why not, in one line (for test skips); empty when available.
std::string cuda_unavailable_reason();

// One device word shared by the optimizers that step one event (see above). Made on the current device.
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

// A step's report as the device recorded it: the optimizer's own (its schedule, its scan's refusal) and whether a
// shared veto stopped it, in which case nothing changed here whatever `own` says.
struct CudaStepReport {
  StepReport own;
  bool vetoed = false;
};

class CudaOptimizer {
 public:
  static constexpr std::uint64_t kReportHistory = 64;  // the step reports kept on the device for report(ticket)

  CudaOptimizer(const StepConfig& config, std::size_t parameters, CUstream_st* stream = nullptr);
  CudaOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes,
                CUstream_st* stream = nullptr);  // as CpuOptimizer's
  ~CudaOptimizer();
  CudaOptimizer(const CudaOptimizer&) = delete;
  CudaOptimizer& operator=(const CudaOptimizer&) = delete;

  // `params` (the whole vector) and `grad` (the fragment's slice) are device pointers. Every step returns its ticket
  // for report(ticket) (1 for the first step, then one more per step).
  std::uint64_t step(float* params, std::size_t params_size, const float* grad, std::size_t grad_size, std::int64_t tau,
                     std::size_t fragment, CUstream_st* stream);
  std::uint64_t step(bf16* params, std::size_t params_size, const float* grad, std::size_t grad_size, std::int64_t tau,
                     std::size_t fragment, CUstream_st* stream);
  // The same step over a table of the caller's device tensors where they lie (CpuOptimizer's table step: one entry
  // per tensor of the layout, params[k] at tensor k's elements, grads[k] at its whole pseudo-gradient, null allowed
  // for a tensor with no element in the fragment), bit for bit the contiguous step over the tensors concatenated.
  // The pointers travel in the launches' arguments, at most agent::kTableBatch tensors per launch, and each chunk
  // finds its tensor through a chunk → tensor map made once (agent/tensor_batch.hpp): nothing is gathered or
  // scattered, and nothing is copied to the device per step.
  std::uint64_t step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                     std::size_t fragment, CUstream_st* stream);
  std::uint64_t step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau,
                     std::size_t fragment, CUstream_st* stream);
  // The table step in two halves. preview() enqueues the event's schedule and refusal scan, changing nothing (as
  // CpuOptimizer::preview, whose report report() then reads); with a veto, a NaN/Inf or overflow sets it.
  // step_previewed() enqueues the previewed event's update and commit, which do nothing while `veto` (null: none) is
  // set; InputError when no preview is pending. Both as the table step for the tables.
  void preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment, CudaEventVeto* veto,
               CUstream_st* stream);
  std::uint64_t step_previewed(std::span<float* const> params, std::span<const float* const> grads,
                               const CudaEventVeto* veto, CUstream_st* stream);
  std::uint64_t step_previewed(std::span<bf16* const> params, std::span<const float* const> grads,
                               const CudaEventVeto* veto, CUstream_st* stream);
  // Waits for the last step (or preview) enqueued and returns its report (a default one before the first).
  StepReport report(CUstream_st* stream = nullptr);
  // Waits for step `ticket` and returns its report; InputError for a ticket not given yet, or one older than the
  // last kReportHistory steps (its slot was reused). Inside a replayed graph the captured step's slot holds the
  // latest replay's report.
  CudaStepReport report(std::uint64_t ticket, CUstream_st* stream = nullptr);
  // The last ticket given (0 before the first step).
  std::uint64_t last_ticket() const;
  void advance_round(CUstream_st* stream = nullptr);

  const StepConfig& config() const;
  std::size_t parameters() const;
  std::vector<core::StateCounter> counters(CUstream_st* stream = nullptr);
  // Copies the device state to the host (waits for the last step).
  HostState download(CUstream_st* stream = nullptr);
  std::vector<std::string> buffer_names() const;  // as CpuOptimizer's
  // As CpuOptimizer::read_buffer: the named buffer ("m", "v" or "b"), dequantized, into host memory.
  void read_buffer(std::string_view name, std::span<float> out, CUstream_st* stream = nullptr);
  // The same file format as CpuOptimizer's (state_file.hpp): a state saved by either backend loads into the
  // other. load() refuses a bad file with InputError and leaves the device state untouched.
  void save(const std::filesystem::path& path, CUstream_st* stream = nullptr);
  void load(const std::filesystem::path& path, CUstream_st* stream = nullptr);
  // The bytes save() writes, and their load (the same checks and refusals), as CpuOptimizer's.
  std::vector<unsigned char> save_bytes(CUstream_st* stream = nullptr);
  void load_bytes(std::span<const unsigned char> bytes, CUstream_st* stream = nullptr);
  // New hyperparameters for the steps to come, as CpuOptimizer::set_hyperparameters (the same refusals:
  // require_same_state_layout; nothing changes on a refusal). The state and the counters stay on the device. It
  // does not wait, except where PA-CGAD's table of σ(a) changes (a new alpha or tau_cut): that upload waits for it.
  // Refused inside a stream capture (the captured steps keep the constants they were captured with).
  void set_hyperparameters(const StepConfig& config, CUstream_st* stream = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgad::fastpath
