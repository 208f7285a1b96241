#pragma once
// The CUDA backend: the same optimizer as CpuOptimizer, its state in device memory, computing the same bits
// (both call block_step.hpp's per-element functions; the kernel is built with --fmad=false and IEEE division
// and sqrt, the host with -ffp-contract=off).
//
//   CudaOptimizer opt(config, n, stream);                    // device state for n parameters
//   opt.step(params_dev, n, grad_dev, fragment_size, tau, fragment, stream);   // enqueue, returns at once
//   StepReport r = opt.report(stream);                       // waits for the last step, tells if it applied
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

class CudaOptimizer {
 public:
  CudaOptimizer(const StepConfig& config, std::size_t parameters, CUstream_st* stream = nullptr);
  CudaOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes,
                CUstream_st* stream = nullptr);  // as CpuOptimizer's
  ~CudaOptimizer();
  CudaOptimizer(const CudaOptimizer&) = delete;
  CudaOptimizer& operator=(const CudaOptimizer&) = delete;

  // `params` (the whole vector) and `grad` (the fragment's slice) are device pointers.
  void step(float* params, std::size_t params_size, const float* grad, std::size_t grad_size, std::int64_t tau,
            std::size_t fragment, CUstream_st* stream);
  void step(bf16* params, std::size_t params_size, const float* grad, std::size_t grad_size, std::int64_t tau,
            std::size_t fragment, CUstream_st* stream);
  // The same step over a table of the caller's device tensors where they lie (CpuOptimizer's table step: one entry
  // per tensor of the layout, params[k] at tensor k's elements, grads[k] at its whole pseudo-gradient, null allowed
  // for a tensor with no element in the fragment), bit for bit the contiguous step over the tensors concatenated.
  // The pointers travel in the launches' arguments, at most agent::kTableBatch tensors per launch, and each chunk
  // finds its tensor through a chunk → tensor map made once (agent/tensor_batch.hpp): nothing is gathered or
  // scattered, and nothing is copied to the device per step.
  void step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau, std::size_t fragment,
            CUstream_st* stream);
  void step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau, std::size_t fragment,
            CUstream_st* stream);
  // Waits for the last step enqueued and returns its report (a default one before the first step).
  StepReport report(CUstream_st* stream = nullptr);
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgad::fastpath
