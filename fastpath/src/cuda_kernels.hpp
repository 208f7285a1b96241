#pragma once
// The two kernels of a CUDA step, behind plain launch functions so the host code compiles with g++.
#include "cgad/fastpath/block_step.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgad::fastpath::cuda {

inline constexpr unsigned long long kNoNonfinite = ~0ull;

// *first_bad = min(*first_bad, index of every NaN/Inf in grad[0, n)); the caller sets it to kNoNonfinite first.
cudaError_t launch_nonfinite_scan(const float* grad, std::uint64_t n, unsigned long long* first_bad,
                                  cudaStream_t stream);
// The fused step over args.size elements, skipped entirely when *first_bad != kNoNonfinite.
cudaError_t launch_fused_step(const StepArgs& args, const unsigned long long* first_bad, cudaStream_t stream);

}  // namespace cgad::fastpath::cuda
