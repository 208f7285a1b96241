#pragma once
// CudaTableStepper's device side (cuda_table_stepper.hpp): the planner, the chunks, the chunk → tensor map, the q8
// maps and PA-CGAD's σ(a) table on the device, the counters and step records there, and the ordering of its calls.
// Shared with CudaOptimizer (cuda_optimizer.cpp), whose contiguous step and state transfers run in its order.
// Host code only (CGAD_FASTPATH_HAS_CUDA).
#include "cuda_kernels.hpp"

#include "cgad/fastpath/cuda_table_stepper.hpp"
#include "cgad/fastpath/detail/cuda_memory.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/detail/tensor_table.hpp"

#include <cuda_runtime_api.h>

#include <optional>
#include <string>
#include <vector>

namespace cgad::fastpath {

// Whether `stream` is capturing. A stream that cannot be used now (the legacy default stream while a blocking
// stream captures: cudaErrorStreamCaptureImplicit) is refused as the caller's mistake, not latched as a fault; the
// query's error is cleared so that it is not taken for a later call's.
bool cuda_capturing(cudaStream_t stream);
// InputError without a device, or inside a capture (an allocation would invalidate it); checked before anything
// allocates device memory.
void require_cuda_device(cudaStream_t stream);

// An ordering event, created with its owner and destroyed with it (also when the owner's constructor throws).
struct CudaEvent {
  cudaEvent_t handle = nullptr;
  CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent();
};

struct CudaTableStepper::Impl {
  StepPlanner planner;
  detail::DeviceBuffer<Q8Map> maps{2};
  detail::DeviceBuffer<StepChunk> chunks;
  // The table step's chunk → tensor map (tensor_table.hpp), on the host to cut launches and on the device; each
  // tensor's first chunk and first slot (where its own state's absmax or fallback slots start).
  std::vector<std::size_t> tensor_begin, chunk_tensor, first_chunk, first_slot;
  detail::DeviceBuffer<std::uint64_t> device_chunk_tensor;
  detail::DeviceBuffer<float> age_sigma;
  detail::DeviceBuffer<std::int64_t> counters;
  detail::DeviceBuffer<cuda::StepRecord> record{1};
  // Each step's record, copied at its end into slot (ticket − 1) mod kReportHistory, for report(ticket).
  detail::DeviceBuffer<cuda::StepRecord> history{kReportHistory};
  std::uint64_t tickets = 0;
  ScheduleConstants constants;  // age_sigma in device memory
  bool stepped = false;         // record holds a step or a preview
  // The event preview() scanned, which step_previewed() steps.
  struct Previewed {
    std::int64_t tau;
    std::size_t fragment;
  };
  std::optional<Previewed> previewed;
  // Every call orders itself after the stepper's previous work, whichever stream that ran on: `last` is recorded
  // after each call's work (outside a stream capture) and a call on another stream waits for it on the device.
  CudaEvent last;
  cudaStream_t last_stream = nullptr;
  // Set by the first failed CUDA call: from then on every call refuses with it.
  std::string fault;

  Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes, cudaStream_t stream);
  ~Impl();

  // A failed call latches the stepper's fault and throws it.
  void guard(cudaError_t status, const std::string& what);
  // Before a call's work on `stream`: refuses once faulted, surfaces a fault of earlier work as such (not as the
  // failure of this call), and orders the work after the stepper's previous work.
  void start(cudaStream_t stream);
  // After it: marks the stepper's latest work (not inside a capture: the event would name a graph node).
  void finish(cudaStream_t stream);
  // Reads block the host, which a stream capture cannot.
  void start_read(cudaStream_t stream, const char* what);
  void wait(cudaStream_t stream);

  CounterView counter_view() const;
  // Copies the counters after what is enqueued on `stream`, waits for all of it, and hands them to the planner
  // (whose own are not kept up to date by steps, which count on the device).
  void take_counters(cudaStream_t stream);
  void put_counters(StepCounters counters, cudaStream_t stream);

  // The contiguous step (CudaOptimizer's): θ the whole vector, Δ the fragment's slice, the moments' views over
  // buffers of the whole vector (chunk_args).
  std::uint64_t step_contiguous(std::size_t params_size, float* params_fp32, bf16* params_bf16, const float* grad,
                                std::size_t grad_size, std::int64_t tau, std::size_t fragment,
                                const MomentView (&whole)[2], cudaStream_t stream);
  std::uint64_t step_table(std::span<void* const> params, std::span<const float* const> grads,
                           std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                           cudaStream_t stream);
  void preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment, unsigned* veto,
               cudaStream_t stream);
  std::uint64_t step_previewed(std::span<void* const> params, std::span<const float* const> grads,
                               std::span<const TensorState> states, const unsigned* veto, cudaStream_t stream);
  StepReport report(cudaStream_t stream);
  CudaStepReport report(std::uint64_t ticket, cudaStream_t stream);
  void set_hyperparameters(const StepConfig& next, cudaStream_t stream);
  void advance_round(cudaStream_t stream);

 private:
  // A table step's launches (at most agent::kTableBatch tensors each) with the tensors' pointers.
  struct Launches {
    std::vector<TableLaunch> launches;
    std::vector<agent::TensorBatch> batches;
  };
  Launches table_batches(std::span<void* const> params, std::span<const float* const> grads,
                         std::span<const TensorState> states, std::size_t fragment) const;
  StepPlanner::Plan table_plan(const std::span<void* const>* params, std::span<const float* const> grads,
                               std::span<const TensorState> states, std::int64_t tau, std::size_t fragment);
  void enqueue_preview(const StepPlanner::Plan& plan, const Launches& l, unsigned* veto, bool publish,
                       cudaStream_t stream);
  std::uint64_t enqueue_update(StepPlanner::Plan& plan, const Launches& l, const unsigned* veto, cudaStream_t stream);
  std::uint64_t end_step(cudaStream_t stream);
  void bind_maps(StepArgs& a) const;
  CudaStepReport read_record(const cuda::StepRecord* at, cudaStream_t stream);
};

}  // namespace cgad::fastpath
