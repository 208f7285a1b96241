#pragma once
// The kernels of a CUDA step, behind plain launch functions so the host code compiles with g++. A step is four
// launches on one stream, none of which waits on the host (so a step can be captured in a CUDA graph):
//   schedule  (one thread): step_schedule.hpp's schedule_step on the device's counters → record.scheduled;
//             record.first_refused reset;
//   scan      (grid): the first NaN/Inf and the first overflowing element of Δ → record.first_refused;
//   fused step (grid): the update, skipped entirely unless the schedule applies and nothing was refused;
//   commit    (one thread): the outcome (outcome_of) → record.outcome, and commit_step on the counters.
// An event stepped by several optimizers (one per torch param group, cuda_optimizer.hpp's CudaEventVeto) runs every
// optimizer's schedule and scan first, each publishing its refusal into one shared device word (the veto), then every
// optimizer's fused step and commit, which do nothing when the veto is set: a NaN/Inf or overflow in any of them
// changes none, decided on the device, with no host sync between the two halves.
#include "cgad/fastpath/detail/block_step.hpp"
#include "cgad/fastpath/detail/step_schedule.hpp"
#include "cgad/fastpath/detail/tensor_batch.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgad::fastpath::cuda {

inline constexpr unsigned long long kNoRefusal = ~0ull;

// The latest step, in device memory. first_refused[0]: the smallest index of a NaN/Inf in Δ; [1]: of a finite
// element the overflow rule refuses (refuses_event, element_update.hpp); kNoRefusal where there is none.
struct StepRecord {
  StepEvent event;
  ScheduledStep scheduled;
  unsigned long long first_refused[2];
  // Elements whose state was invalid when the update read it (update_element, block_step.hpp): they kept what
  // they read. Zeroed by the schedule kernel; a block that finds some adds them with one atomic.
  unsigned long long invalid_state;
  StepOutcome outcome;
  bool vetoed;  // another optimizer of the event refused it: nothing changed here, whatever `outcome` says
};

cudaError_t launch_schedule(const ScheduleConstants& constants, const CounterView& counters, const StepEvent& event,
                            StepRecord* record, cudaStream_t stream);
cudaError_t launch_refusal_scan(const float* grad, std::uint64_t n, StepRecord* record, cudaStream_t stream);
// Where the event's refusal in this optimizer sets the shared veto (null: no veto, a single optimizer's step); the
// record's outcome is then what the step will report unless vetoed (a preview).
cudaError_t launch_publish_refusal(StepRecord* record, unsigned* veto, cudaStream_t stream);
// The update and the commit take the veto (null: none), and do nothing while it is set.
cudaError_t launch_fused_step(const StepArgs& args, const StepChunk* chunks, std::uint64_t chunk_count,
                              StepRecord* record, const unsigned* veto, cudaStream_t stream);
// The table step's scan and fused step over chunks[0, chunk_count) of one launch, chunk c lying in tensor
// chunk_tensor[c] of the batch (agent/tensor_batch.hpp); the scan counts indices from `fragment_offset`, the fragment's
// first element, as the contiguous scan does. A step over more tensors than a batch holds runs every scan before
// any fused step, so each fused launch sees the whole event's refusal.
cudaError_t launch_table_refusal_scan(const StepChunk* chunks, const std::uint64_t* chunk_tensor,
                                      std::uint64_t chunk_count, std::uint64_t fragment_offset,
                                      const agent::TensorBatch& batch, StepRecord* record, cudaStream_t stream);
cudaError_t launch_table_fused_step(const StepArgs& args, const StepChunk* chunks, const std::uint64_t* chunk_tensor,
                                    std::uint64_t chunk_count, const agent::TensorBatch& batch, StepRecord* record,
                                    const unsigned* veto, cudaStream_t stream);
cudaError_t launch_commit(const ScheduleConstants& constants, const CounterView& counters, StepRecord* record,
                          const unsigned* veto, cudaStream_t stream);
// ++round on the device (PA-CGAD's ages).
cudaError_t launch_advance_round(std::int64_t* round, cudaStream_t stream);

}  // namespace cgad::fastpath::cuda
