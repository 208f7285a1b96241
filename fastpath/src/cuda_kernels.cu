// The fused CUDA step (DESIGN.md §5): one CUDA block of 64 threads × 4 items per 256-element q8 block, the
// layout CUB calls "blocked" (thread t owns elements 4t..4t+3). Each thread runs the per-element update that
// the CPU backend runs (block_step.hpp), so the two compute the same bits.
#include "cuda_kernels.hpp"

#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>

namespace cgad::fastpath::cuda {
namespace {

constexpr int kThreads = 64;
constexpr int kItems = static_cast<int>(kQ8BlockSize) / kThreads;
// Enough blocks to fill an H100/H200 many times over; larger tensors loop (grid-stride over q8 blocks).
constexpr std::uint64_t kMaxGrid = 1u << 16;

struct AbsmaxOp {
  __device__ float operator()(float a, float b) const { return a < b ? b : a; }
};

__global__ void nonfinite_scan_kernel(const float* grad, std::uint64_t n, unsigned long long* first_bad) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (!isfinite(grad[i])) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

__global__ void __launch_bounds__(kThreads) fused_step_kernel(StepArgs a, const unsigned long long* first_bad) {
  using Load = cub::BlockLoad<float, kThreads, kItems, cub::BLOCK_LOAD_VECTORIZE>;
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Reduce::TempStorage reduce;
  } temp;
  __shared__ float shared_absmax;
  if (*first_bad != kNoNonfinite) return;  // the same for every block: a NaN/Inf step changes nothing
  const bool q8 = a.state == StateCode::q8;
  const std::uint64_t blocks = block_count(a.size);
  for (std::uint64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    const std::uint64_t begin = block * kQ8BlockSize;
    const std::uint64_t remaining = a.size - begin;
    const int valid = remaining < kQ8BlockSize ? static_cast<int>(remaining) : static_cast<int>(kQ8BlockSize);
    float delta[kItems];
    if (valid == static_cast<int>(kQ8BlockSize)) {
      Load(temp.load).Load(a.grad + begin, delta);  // float4 loads when aligned (cudaMalloc'd, 1 KiB offsets)
    } else {
      Load(temp.load).Load(a.grad + begin, delta, valid, 0.0f);
    }
    __syncthreads();  // temp.load is reused by the reduction below
    float old_absmax[2] = {0.0f, 0.0f};
    if (q8) {
      for (int k = 0; k < a.moments; ++k) old_absmax[k] = a.moment[k].absmax[block];
    }
    float fresh[2][kItems];
    RandomWords random[kItems];
    for (int j = 0; j < kItems; ++j) {
      const int local = static_cast<int>(threadIdx.x) * kItems + j;
      fresh[0][j] = fresh[1][j] = 0.0f;
      if (local >= valid) continue;
      const std::uint64_t i = begin + static_cast<std::uint64_t>(local);
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
      const float absmax = Reduce(temp.reduce).Reduce(partial, AbsmaxOp{});
      if (threadIdx.x == 0) {
        shared_absmax = absmax;
        a.moment[k].absmax[block] = absmax;
      }
      __syncthreads();
      const float block_absmax = shared_absmax;
      for (int j = 0; j < kItems; ++j) {
        const int local = static_cast<int>(threadIdx.x) * kItems + j;
        if (local < valid) {
          a.moment[k].codes[begin + local] = quantize_moment(a, a.moment[k], fresh[k][j], block_absmax, random[j]);
        }
      }
      __syncthreads();  // shared_absmax and temp.reduce are reused for the next moment / block
    }
  }
}

unsigned grid_for(std::uint64_t blocks) {
  return static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

}  // namespace

cudaError_t launch_nonfinite_scan(const float* grad, std::uint64_t n, unsigned long long* first_bad,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  nonfinite_scan_kernel<<<grid_for((n + 255) / 256), 256, 0, stream>>>(grad, n, first_bad);
  return cudaGetLastError();
}

cudaError_t launch_fused_step(const StepArgs& args, const unsigned long long* first_bad, cudaStream_t stream) {
  if (args.size == 0) return cudaSuccess;
  fused_step_kernel<<<grid_for(block_count(args.size)), kThreads, 0, stream>>>(args, first_bad);
  return cudaGetLastError();
}

}  // namespace cgad::fastpath::cuda
