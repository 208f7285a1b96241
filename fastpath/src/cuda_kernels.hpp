#pragma once
// The two kernels of a CUDA step, behind plain launch functions so the host code compiles with g++.
#include "cgad/fastpath/block_step.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgad::fastpath::cuda {

inline constexpr unsigned long long kNoRefusal = ~0ull;

// first_refused[0] = min(itself, index of every NaN/Inf in grad[0, n)); first_refused[1] = the same for every
// finite element the overflow rule refuses (refuses_event, element_update.hpp). The caller sets both to
// kNoRefusal first.
cudaError_t launch_refusal_scan(const float* grad, std::uint64_t n, float sigma, unsigned long long* first_refused,
                                cudaStream_t stream);
// The fused step over the fragment's chunks (device memory), skipped entirely when either refusal was found.
cudaError_t launch_fused_step(const StepArgs& args, const StepChunk* chunks, std::uint64_t chunk_count,
                              const unsigned long long* first_refused, cudaStream_t stream);

}  // namespace cgad::fastpath::cuda
