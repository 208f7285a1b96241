#pragma once
// The operands of the CUDA table step (docs/design.md §5: parameters and Δ in the caller's tensors, one pointer per
// tensor), as PyTorch's multi_tensor_apply (aten/src/ATen/native/cuda/MultiTensorApply.cuh) hands its tensor lists to
// a kernel: the pointers of a batch of tensors travel by value in the launch's arguments, and a block → tensor map
// says where each block's chunk lies. Here the map is the planner's chunk → tensor index (tensor_table.hpp's
// chunk_tensors), uploaded once, because the chunks never change; only the pointers do, step by step. A chunk never
// crosses a tensor boundary (block_step.hpp), so its operands are one tensor's pointers moved to the chunk.
#include "cgad/fastpath/detail/block_step.hpp"

#include <cstdint>

namespace cgad::fastpath::agent {

// Tensors per launch: 64 × 3 pointers-or-indices = 1.5 KiB of arguments, with StepArgs well inside the 4 KiB every
// CUDA architecture accepts. A step over more tensors is several launches (table_launches, tensor_table.hpp).
inline constexpr int kTableBatch = 64;

struct TensorBatch {
  std::uint64_t first_tensor = 0;         // the layout index of entry 0
  std::uint64_t begin[kTableBatch] = {};  // each tensor's first element in the whole parameter vector
  const float* grad[kTableBatch] = {};    // its whole pseudo-gradient
  void* params[kTableBatch] = {};         // its elements: float or bf16, the step's parameter format
};

// Chunk `c`, which lies in tensor `tensor` of the layout, of step `a` (buffer starts, as the contiguous step's), with
// Δ and θ taken from the batch: what chunk_args gives the contiguous step over the tensors concatenated, and what
// the CPU backend's table step forms (cpu_optimizer.cpp), so the two agree bit for bit.
CGAD_HD inline StepArgs table_chunk_args(const StepArgs& a, const StepChunk& c, std::uint64_t tensor,
                                         const TensorBatch& b) {
  const std::uint64_t k = tensor - b.first_tensor;
  const std::uint64_t at = c.begin - b.begin[k];
  StepArgs whole = a;
  whole.grad = b.grad[k] + at;
  whole.first_index = c.begin;
  whole.params_fp32 = nullptr;
  whole.params_bf16 = nullptr;
  StepArgs r = chunk_args(whole, c);
  if (a.params == ParamFormat::fp32) {
    r.params_fp32 = static_cast<float*>(b.params[k]) + at;
  } else {
    r.params_bf16 = static_cast<bf16*>(b.params[k]) + at;
  }
  return r;
}

}  // namespace cgad::fastpath::agent
