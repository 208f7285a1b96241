// The CUDA step (docs/design.md §5), in CUB's layering: block_step.hpp's per-element functions (the CPU backend's)
// → the agent (agent/step_agent.hpp: every operand of a full, aligned chunk moved with vector width, a guarded
// striped path otherwise) → the fused kernel, one CUDA block of TilePolicy::threads per chunk (a chunk never crosses
// a tensor or fragment boundary), grid-stride over the chunks → the launch functions the host calls on the caller's
// stream. The fused kernel is instantiated per format configuration (FixedFormats through with_fixed_formats, the
// CPU block loops' dispatch); a q8 configuration's fp32-fallback chunks run its Fp32State formats. The schedule and
// commit kernels run step_schedule.hpp's functions, the CPU backend's, on the counters in device memory.
#include "cuda_kernels.hpp"

#include "cgad/fastpath/detail/step_agent.hpp"

#include <cub/block/block_reduce.cuh>

#include <tuple>

namespace cgad::fastpath::cuda {
namespace {

using agent::TilePolicy;
using agent::TileThread;
// Enough blocks to fill an H100/H200 many times over; more chunks loop (grid-stride over chunks).
constexpr std::uint64_t kMaxGrid = 1u << 16;

struct AbsmaxOp {
  __device__ float operator()(float a, float b) const { return a < b ? b : a; }
};

constexpr int kScanThreads = 256;

struct IndexMinOp {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return b < a ? b : a; }
};

__global__ void schedule_kernel(ScheduleConstants constants, CounterView counters, StepEvent event,
                                StepRecord* record) {
  const CounterValues values{counters.t, counters.last_sync, *counters.round, *counters.steps};
  record->event = event;
  record->scheduled = schedule_step(constants, values, event);
  record->first_refused[0] = record->first_refused[1] = kNoRefusal;
  record->invalid_state = 0;
}

__device__ StepOutcome recorded_outcome(const StepRecord* record) {
  return outcome_of(record->scheduled, record->first_refused[0] != kNoRefusal, record->first_refused[1] != kNoRefusal);
}

__device__ bool is_vetoed(const unsigned* veto) {
  return veto != nullptr && *veto != 0;
}

// A vetoed event commits nothing: its counters stay as a refused event's do (commit_step changes nothing for one).
__global__ void commit_kernel(ScheduleConstants constants, CounterView counters, StepRecord* record,
                              const unsigned* veto) {
  const StepOutcome outcome = recorded_outcome(record);
  record->outcome = outcome;
  record->vetoed = is_vetoed(veto);
  if (!record->vetoed) commit_step(constants, counters, record->event.fragment, outcome);
}

// The refusals the reference reports (NaN/Inf first, then overflow) veto the event everywhere; a zero-gate skip is
// the optimizer's own and vetoes nothing (cgad.torch steps the other groups).
__global__ void publish_refusal_kernel(StepRecord* record, unsigned* veto) {
  const StepOutcome outcome = recorded_outcome(record);
  record->outcome = outcome;
  record->vetoed = false;
  if (veto != nullptr && (outcome == StepOutcome::nonfinite || outcome == StepOutcome::overflow)) *veto = 1;
}

__global__ void advance_round_kernel(std::int64_t* round) {
  *round += 1;
}

// Each thread keeps the first NaN/Inf and the first overflowing index it sees, the block reduces them, and one
// atomicMin per block and kind publishes them: a Δ that is NaN everywhere costs one atomic per block, not one per
// element serialized on the same address.
__global__ void __launch_bounds__(kScanThreads)
    refusal_scan_kernel(const float* grad, std::uint64_t n, StepRecord* record) {
  // σ = 0 where the event is not applied, so that only NaN/Inf is looked for (cpu_optimizer.cpp's scan).
  const float sigma = record->scheduled.applied ? record->scheduled.sigma : 0.0f;
  unsigned long long* first = record->first_refused;
  using Reduce = cub::BlockReduce<unsigned long long, kScanThreads>;
  __shared__ typename Reduce::TempStorage reduce;
  unsigned long long found[2] = {kNoRefusal, kNoRefusal};
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = grad[i];
    // Indices only grow along the loop, so the first one found of each kind is the thread's smallest.
    if (!isfinite(g)) {
      if (found[0] == kNoRefusal) found[0] = i;
    } else if (refuses_event(sigma, g)) {
      if (found[1] == kNoRefusal) found[1] = i;
    }
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const unsigned long long block_first = Reduce(reduce).Reduce(found[k], IndexMinOp{});
    if (threadIdx.x == 0 && block_first != kNoRefusal) atomicMin(&first[k], block_first);
    __syncthreads();  // the reduction's storage is reused for the second kind
  }
}

using Reduce = cub::BlockReduce<float, TilePolicy::threads>;

// Chunk `a` by the whole block in formats F. Elements with invalid state (update_element) are counted into
// `record` by the thread that holds them, with an atomic only where there are some; a q8 chunk holding one keeps
// its codes and absmax, decided for the whole block at once (__syncthreads_or), as the CPU's block loop does.
template <class F>
__device__ void step_chunk(StepArgs& a, Reduce::TempStorage& reduce, float& shared_absmax, StepRecord* record) {
  float old[2];
  agent::old_absmax<F>(a, old);
  TileThread<F> thread;
  thread.update(a, static_cast<int>(threadIdx.x), agent::vectorized_tile<F>(a), old);
  if (thread.invalid() != 0) atomicAdd(&record->invalid_state, static_cast<unsigned long long>(thread.invalid()));
  if constexpr (F::kState == StateFormat::q8) {
    // Also the barrier that orders every thread's read of the old absmax before thread 0 may replace it.
    if (__syncthreads_or(thread.invalid() != 0) != 0) return;
#pragma unroll
    for (int k = 0; k < 2 && k < a.moments; ++k) {  // a constant bound: k indexes registers
      // Reduce's own barrier orders every thread's read of the old absmax before thread 0 replaces it.
      const float reduced = Reduce(reduce).Reduce(thread.partial_absmax(k), AbsmaxOp{});
      if (threadIdx.x == 0) {
        shared_absmax = agent::finish_absmax<F>(a, k, reduced, old);
        a.moment[k].absmax[0] = shared_absmax;
      }
      __syncthreads();
      thread.store_codes(a, k, shared_absmax);
      __syncthreads();  // shared_absmax and the reduction's storage are reused for the next moment / chunk
    }
  }
}

// Whether the step's update runs: the same for every block, so a skipped or refused step changes nothing.
__device__ bool update_runs(const StepRecord* record, const unsigned* veto) {
  return record->scheduled.applied && record->first_refused[0] == kNoRefusal &&
         record->first_refused[1] == kNoRefusal && !is_vetoed(veto);
}

// The chunks of the launch, grid-stride, each at the operands `chunk_at(step, chunk, c)` gives.
template <class F, class ChunkAt>
__device__ void step_chunks(StepArgs step, const StepChunk* chunks, std::uint64_t chunk_count, StepRecord* record,
                            const unsigned* veto, const ChunkAt& chunk_at) {
  __shared__ Reduce::TempStorage reduce;
  __shared__ float shared_absmax;
  if (!update_runs(record, veto)) return;
  apply_schedule(step, record->scheduled);
  for (std::uint64_t c = blockIdx.x; c < chunk_count; c += gridDim.x) {
    const StepChunk chunk = chunks[c];
    if (chunk_at.left_out(c)) continue;
    StepArgs a = chunk_at(step, chunk, c);
    agent::with_chunk_formats<F>(
        chunk, [&](auto formats) { step_chunk<typename decltype(formats)::type>(a, reduce, shared_absmax, record); });
  }
}

// The contiguous step's operands: the whole vector and the fragment's Δ slice.
struct ContiguousChunk {
  __device__ bool left_out(std::uint64_t) const { return false; }
  __device__ StepArgs operator()(const StepArgs& step, const StepChunk& chunk, std::uint64_t) const {
    return chunk_args(step, chunk);
  }
};

// The table step's: the pointers of the chunk's tensor in the launch's batch (Δ, θ and its own state); a tensor
// whose gradient pointer is null is left out of the step (table_stepper.hpp).
struct TableChunk {
  const std::uint64_t* chunk_tensor;
  const agent::TensorBatch* batch;
  __device__ bool left_out(std::uint64_t c) const {
    return batch->grad[chunk_tensor[c] - batch->first_tensor] == nullptr;
  }
  __device__ StepArgs operator()(const StepArgs& step, const StepChunk& chunk, std::uint64_t c) const {
    return agent::table_chunk_args(step, chunk, chunk_tensor[c], *batch);
  }
};

// One instantiation per format configuration F (with_fixed_formats, block_step.hpp), as the CPU's block loops.
template <class F>
__global__ void __launch_bounds__(TilePolicy::threads)
    fused_step_kernel(StepArgs step, const StepChunk* chunks, std::uint64_t chunk_count, StepRecord* record,
                      const unsigned* veto) {
  step_chunks<F>(step, chunks, chunk_count, record, veto, ContiguousChunk{});
}

template <class F>
__global__ void __launch_bounds__(TilePolicy::threads)
    table_step_kernel(StepArgs step, const StepChunk* chunks, const std::uint64_t* chunk_tensor,
                      std::uint64_t chunk_count, agent::TensorBatch batch, StepRecord* record, const unsigned* veto) {
  step_chunks<F>(step, chunks, chunk_count, record, veto, TableChunk{chunk_tensor, &batch});
}

// The table step's refusal scan: one block per chunk (a chunk is at most kScanThreads elements), thread j on its
// element j, the first NaN/Inf and overflow of each kind published as refusal_scan_kernel does.
__global__ void __launch_bounds__(kScanThreads)
    table_refusal_scan_kernel(const StepChunk* chunks, const std::uint64_t* chunk_tensor, std::uint64_t chunk_count,
                              std::uint64_t fragment_offset, agent::TensorBatch batch, StepRecord* record) {
  static_assert(kScanThreads >= static_cast<int>(kQ8BlockSize));
  const float sigma = record->scheduled.applied ? record->scheduled.sigma : 0.0f;
  unsigned long long* first = record->first_refused;
  using IndexReduce = cub::BlockReduce<unsigned long long, kScanThreads>;
  __shared__ typename IndexReduce::TempStorage reduce;
  unsigned long long found[2] = {kNoRefusal, kNoRefusal};
  // A thread's chunks ascend, so the first index found of each kind is its smallest.
  for (std::uint64_t c = blockIdx.x; c < chunk_count; c += gridDim.x) {
    const StepChunk chunk = chunks[c];
    if (threadIdx.x >= chunk.count) continue;
    const std::uint64_t k = chunk_tensor[c] - batch.first_tensor;
    if (batch.grad[k] == nullptr) continue;  // left out of the step
    const float g = batch.grad[k][chunk.begin - batch.begin[k] + threadIdx.x];
    const unsigned long long i = chunk.begin - fragment_offset + threadIdx.x;
    if (!isfinite(g)) {
      if (found[0] == kNoRefusal) found[0] = i;
    } else if (refuses_event(sigma, g)) {
      if (found[1] == kNoRefusal) found[1] = i;
    }
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const unsigned long long block_first = IndexReduce(reduce).Reduce(found[k], IndexMinOp{});
    if (threadIdx.x == 0 && block_first != kNoRefusal) atomicMin(&first[k], block_first);
    __syncthreads();
  }
}

unsigned grid_for(std::uint64_t blocks) {
  return static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

// kernel<<<grid, block, 0, stream>>>(args...) through cudaLaunchKernel, whose status is this launch's own:
// cudaGetLastError after <<<>>> would also return (and clear) an error some earlier call of the thread left.
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), unsigned grid, unsigned block, cudaStream_t stream, const Args&... args) {
  std::tuple<Params...> values(args...);
  return std::apply(
      [&](auto&... value) {
        void* pointers[] = {static_cast<void*>(&value)...};
        return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(grid), dim3(block), pointers, 0, stream);
      },
      values);
}

}  // namespace

cudaError_t launch_schedule(const ScheduleConstants& constants, const CounterView& counters, const StepEvent& event,
                            StepRecord* record, cudaStream_t stream) {
  return launch(schedule_kernel, 1, 1, stream, constants, counters, event, record);
}

cudaError_t launch_refusal_scan(const float* grad, std::uint64_t n, StepRecord* record, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned grid = grid_for((n + kScanThreads - 1) / kScanThreads);
  return launch(refusal_scan_kernel, grid, kScanThreads, stream, grad, n, record);
}

cudaError_t launch_publish_refusal(StepRecord* record, unsigned* veto, cudaStream_t stream) {
  return launch(publish_refusal_kernel, 1, 1, stream, record, veto);
}

cudaError_t launch_fused_step(const StepArgs& args, const StepChunk* chunks, std::uint64_t chunk_count,
                              StepRecord* record, const unsigned* veto, cudaStream_t stream) {
  if (chunk_count == 0) return cudaSuccess;
  return with_fixed_formats(args, [&](auto formats) {
    return launch(fused_step_kernel<typename decltype(formats)::type>, grid_for(chunk_count), TilePolicy::threads,
                  stream, args, chunks, chunk_count, record, veto);
  });
}

cudaError_t launch_table_refusal_scan(const StepChunk* chunks, const std::uint64_t* chunk_tensor,
                                      std::uint64_t chunk_count, std::uint64_t fragment_offset,
                                      const agent::TensorBatch& batch, StepRecord* record, cudaStream_t stream) {
  if (chunk_count == 0) return cudaSuccess;
  return launch(table_refusal_scan_kernel, grid_for(chunk_count), kScanThreads, stream, chunks, chunk_tensor,
                chunk_count, fragment_offset, batch, record);
}

cudaError_t launch_table_fused_step(const StepArgs& args, const StepChunk* chunks, const std::uint64_t* chunk_tensor,
                                    std::uint64_t chunk_count, const agent::TensorBatch& batch, StepRecord* record,
                                    const unsigned* veto, cudaStream_t stream) {
  if (chunk_count == 0) return cudaSuccess;
  return with_fixed_formats(args, [&](auto formats) {
    return launch(table_step_kernel<typename decltype(formats)::type>, grid_for(chunk_count), TilePolicy::threads,
                  stream, args, chunks, chunk_tensor, chunk_count, batch, record, veto);
  });
}

cudaError_t launch_commit(const ScheduleConstants& constants, const CounterView& counters, StepRecord* record,
                          const unsigned* veto, cudaStream_t stream) {
  return launch(commit_kernel, 1, 1, stream, constants, counters, record, veto);
}

cudaError_t launch_advance_round(std::int64_t* round, cudaStream_t stream) {
  return launch(advance_round_kernel, 1, 1, stream, round);
}

}  // namespace cgad::fastpath::cuda
