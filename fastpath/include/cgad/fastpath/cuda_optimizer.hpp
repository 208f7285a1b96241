#pragma once
// The CUDA backend's owning optimizer, for the CLI, simulate and the C++ API: CudaTableStepper
// (cuda_table_stepper.hpp, whose launches, streams, graph capture and faults it shares) over optimizer state in
// device buffers of its own, computing the same bits as CpuOptimizer (both call block_step.hpp's per-element
// functions; the kernel is built with --fmad=false and IEEE division and sqrt, the host with -ffp-contract=off).
//
//   CudaOptimizer opt(config, n, stream);                    // device state for n parameters
//   opt.step(params_dev, n, grad_dev, fragment_size, tau, fragment, stream);   // enqueue, returns at once
//   StepReport r = opt.report(stream);                       // waits for the last step, tells if it applied
//   opt.set_hyperparameters(next, stream);                   // an lr schedule: no wait, the counters stay
//   opt.save_bytes(stream);  opt.load_bytes(bytes, stream);  // the state file's bytes (state_file.hpp)
//
// The same seam as CpuOptimizer (fastpath.hpp): step over a table of tensors, preview, set_hyperparameters,
// save_bytes/load_bytes, counters; a state saved by either backend loads into the other. Its table steps are the
// stepper's over one TensorState per tensor of its own buffers (as CpuOptimizer's are TableStepper's over its
// HostState); its contiguous step takes θ as one vector and Δ as the fragment's slice.
//
// The calls that return host data (report, counters, download, read_buffer, save, load) wait for their stream and
// are refused inside a capture. After a fault (cuda_table_stepper.hpp) the device state is lost; a saved state loads
// into a new optimizer.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/cuda_table_stepper.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::fastpath {

struct HostState;  // detail/host_state.hpp: the state in host memory, as download() copies it

class CudaOptimizer {
 public:
  static constexpr std::uint64_t kReportHistory = CudaTableStepper::kReportHistory;

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
  // per tensor of the layout, params[k] at tensor k's elements, grads[k] at its whole pseudo-gradient; a null
  // gradient leaves the tensor out), bit for bit the contiguous step over the tensors concatenated where none is
  // left out: CudaTableStepper::step over this optimizer's state.
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
