#pragma once
// The operands of the CUDA table step (docs/design.md §5: parameters, Δ and the optimizer state in the caller's
// tensors, pointers per tensor), as PyTorch's multi_tensor_apply (aten/src/ATen/native/cuda/MultiTensorApply.cuh) hands
// its tensor lists to a kernel: the pointers of a batch of tensors travel by value in the launch's arguments, and a
// block → tensor map says where each block's chunk lies. Here the map is the planner's chunk → tensor index
// (tensor_table.hpp's chunk_tensors), uploaded once, because the chunks never change; only the pointers do, step by
// step. A chunk never crosses a tensor boundary (block_step.hpp), so its operands are one tensor's pointers moved to
// the chunk.
#include "cgad/fastpath/detail/block_step.hpp"

#include <cstdint>

namespace cgad::fastpath::agent {

// Tensors per launch: 32 × 8 pointers-or-indices = 2 KiB of arguments, with StepArgs well inside the 4 KiB every
// CUDA architecture accepts. A step over more tensors is several launches (table_launches, tensor_table.hpp).
inline constexpr int kTableBatch = 32;

struct TensorBatch {
  std::uint64_t first_tensor = 0;         // the layout index of entry 0
  std::uint64_t begin[kTableBatch] = {};  // each tensor's first element in the whole parameter vector
  const float* grad[kTableBatch] = {};    // its whole pseudo-gradient
  void* params[kTableBatch] = {};         // its elements: float or bf16, the step's parameter format
  // Its own optimizer state (the caller's TensorState, table_stepper.hpp): per moment the values -- fp32, bf16, q8
  // codes, or the fp32 moments of a tensor under min_q8_size -- and the q8 absmax, from the tensor's first element
  // and first slot; first_slot is that slot's index among the whole vector's (StepChunk::slot).
  void* values[2][kTableBatch] = {};
  float* absmax[2][kTableBatch] = {};
  std::uint64_t first_slot[kTableBatch] = {};
};

// Chunk `c`, which lies in tensor `tensor` of the layout, of step `a` (its moments' maps and random words, no
// buffers), with Δ, θ and the state taken from the batch: what the CPU backend's table step forms from the same
// tensor's pointers and TensorState (table_stepper.cpp's run: chunk_args_at at the chunk's place in its tensor), so
// the two agree bit for bit.
CGAD_HD inline StepArgs table_chunk_args(const StepArgs& a, const StepChunk& c, std::uint64_t tensor,
                                         const TensorBatch& b) {
  const std::uint64_t k = tensor - b.first_tensor;
  const std::uint64_t at = c.begin - b.begin[k];
  StepArgs whole = a;
  whole.grad = b.grad[k];
  whole.first_index = b.begin[k];
  whole.params_fp32 = nullptr;
  whole.params_bf16 = nullptr;
  for (int m = 0; m < 2 && m < a.moments; ++m) {  // chunk_args_at picks the view the chunk's format reads
    MomentView& view = whole.moment[m];
    view.fp32 = static_cast<float*>(b.values[m][k]);
    view.bf16_values = static_cast<bf16*>(b.values[m][k]);
    view.codes = static_cast<std::uint8_t*>(b.values[m][k]);
    view.fallback = static_cast<float*>(b.values[m][k]);
    view.absmax = b.absmax[m][k];
  }
  StepArgs r = chunk_args_at(whole, c, at, c.slot - b.first_slot[k]);
  if (a.params == ParamFormat::fp32) {
    r.params_fp32 = static_cast<float*>(b.params[k]) + at;
  } else {
    r.params_bf16 = static_cast<bf16*>(b.params[k]) + at;
  }
  return r;
}

}  // namespace cgad::fastpath::agent
