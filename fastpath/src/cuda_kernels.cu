// The fused CUDA step (DESIGN.md §5): one CUDA block of 64 threads × 4 items per chunk of at most 256
// elements (block_step.hpp: a chunk never crosses a tensor or fragment boundary), the layout CUB calls
// "blocked" (thread t owns elements 4t..4t+3). Each thread runs the per-element update that the CPU backend
// runs (block_step.hpp), so the two compute the same bits.
#include "cuda_kernels.hpp"

#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>

namespace cgad::fastpath::cuda {
namespace {

constexpr int kThreads = 64;
constexpr int kItems = static_cast<int>(kQ8BlockSize) / kThreads;
// Enough blocks to fill an H100/H200 many times over; more chunks loop (grid-stride over chunks).
constexpr std::uint64_t kMaxGrid = 1u << 16;

struct AbsmaxOp {
  __device__ float operator()(float a, float b) const { return a < b ? b : a; }
};

__global__ void refusal_scan_kernel(const float* grad, std::uint64_t n, float sigma, unsigned long long* first) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (!isfinite(grad[i])) {
      atomicMin(&first[0], static_cast<unsigned long long>(i));
    } else if (refuses_event(sigma, grad[i])) {
      atomicMin(&first[1], static_cast<unsigned long long>(i));
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    fused_step_kernel(StepArgs step, const StepChunk* chunks, std::uint64_t chunk_count,
                      const unsigned long long* first_refused) {
  using Load = cub::BlockLoad<float, kThreads, kItems, cub::BLOCK_LOAD_VECTORIZE>;
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Reduce::TempStorage reduce;
  } temp;
  __shared__ float shared_absmax;
  // The same for every block: a refused step changes nothing.
  if (first_refused[0] != kNoRefusal || first_refused[1] != kNoRefusal) return;
  for (std::uint64_t c = blockIdx.x; c < chunk_count; c += gridDim.x) {
    const StepArgs a = chunk_args(step, chunks[c]);
    const bool q8 = a.state == StateFormat::q8;
    const int valid = static_cast<int>(a.size);
    float delta[kItems];
    // CUB's vectorized load needs a 16-byte aligned full tile; chunks start at tensor and fragment boundaries,
    // which need not be aligned, so those take the guarded (scalar) load.
    if (valid == static_cast<int>(kQ8BlockSize) && reinterpret_cast<std::uintptr_t>(a.grad) % 16 == 0) {
      Load(temp.load).Load(a.grad, delta);
    } else {
      Load(temp.load).Load(a.grad, delta, valid, 0.0f);
    }
    __syncthreads();  // temp.load is reused by the reduction below
    float old_absmax[2] = {0.0f, 0.0f};
    if (q8) {
      for (int k = 0; k < a.moments; ++k) old_absmax[k] = a.moment[k].absmax[0];
    }
    float fresh[2][kItems];
    RandomWords random[kItems];
    for (int j = 0; j < kItems; ++j) {
      const int local = static_cast<int>(threadIdx.x) * kItems + j;
      fresh[0][j] = fresh[1][j] = 0.0f;
      if (local >= valid) continue;
      const std::uint64_t i = static_cast<std::uint64_t>(local);
      random[j] = random_for(a, i);
      float out[2];
      update_element(a, i, delta[j], old_absmax, out, random[j]);
      for (int k = 0; k < a.moments; ++k) {
        fresh[k][j] = out[k];
        if (!q8) store_moment_elementwise(a, a.moment[k], i, out[k], random[j]);
      }
    }
    if (!q8) continue;
    for (int k = 0; k < a.moments; ++k) {
      float partial = 0.0f;
      for (int j = 0; j < kItems; ++j) partial = absmax_step(partial, fresh[k][j]);  // padding is 0
      float absmax = Reduce(temp.reduce).Reduce(partial, AbsmaxOp{});
      if (threadIdx.x == 0) {
        // bnb's partial block: its padding's m takes part in the new absmax (block_step.hpp).
        if (a.bnb && k == 0 && valid < static_cast<int>(kQ8BlockSize)) {
          absmax = absmax_step(absmax, bnb_padding_first_moment(a.adam, old_absmax[0], *a.moment[0].map));
        }
        shared_absmax = absmax;
        a.moment[k].absmax[0] = absmax;
      }
      __syncthreads();
      const float block_absmax = shared_absmax;
      for (int j = 0; j < kItems; ++j) {
        const int local = static_cast<int>(threadIdx.x) * kItems + j;
        if (local < valid) {
          a.moment[k].codes[local] = quantize_moment(a, a.moment[k], k, fresh[k][j], block_absmax, random[j]);
        }
      }
      __syncthreads();  // shared_absmax and temp.reduce are reused for the next moment / chunk
    }
  }
}

unsigned grid_for(std::uint64_t blocks) {
  return static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

}  // namespace

cudaError_t launch_refusal_scan(const float* grad, std::uint64_t n, float sigma, unsigned long long* first_refused,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  refusal_scan_kernel<<<grid_for((n + 255) / 256), 256, 0, stream>>>(grad, n, sigma, first_refused);
  return cudaGetLastError();
}

cudaError_t launch_fused_step(const StepArgs& args, const StepChunk* chunks, std::uint64_t chunk_count,
                              const unsigned long long* first_refused, cudaStream_t stream) {
  if (chunk_count == 0) return cudaSuccess;
  fused_step_kernel<<<grid_for(chunk_count), kThreads, 0, stream>>>(args, chunks, chunk_count, first_refused);
  return cudaGetLastError();
}

}  // namespace cgad::fastpath::cuda
