#pragma once
// What both backends' table steps (a pointer per tensor of the layout, the caller's tensors where they lie) know of
// the layout: where each tensor starts, which tensor holds each chunk, the refusal of a bad table, and — for the
// CUDA backend, whose launches carry at most agent::kTableBatch tensors' pointers — how a fragment's chunks split
// into launches.
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/detail/tensor_batch.hpp"
#include "cgad/fastpath/tensor_state.hpp"
#include "cgad/core/errors.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cgad::fastpath {

// Tensor k's first element in the whole vector; one entry more than tensors (the last is the vector's size).
std::vector<std::size_t> tensor_begins(const std::vector<std::size_t>& sizes);
// The tensor holding each chunk of planner.chunks() (empty tensors hold none).
std::vector<std::size_t> chunk_tensors(const StepPlanner& planner, const std::vector<std::size_t>& tensor_begin);

// Tensor k's first chunk (one entry more than tensors; an empty tensor's is the next one's), and its first absmax
// or fallback slot (0 for a tensor of no chunk): where a tensor's own state starts in buffers over the whole vector.
std::vector<std::size_t> tensor_first_chunks(const std::vector<std::size_t>& chunk_tensor, std::size_t tensors);
std::vector<std::size_t> tensor_first_slots(const StepPlanner& planner, const std::vector<std::size_t>& chunk_tensor,
                                            std::size_t tensors);

// Both backends' table steps take the caller's per-tensor state (TensorState, table_stepper.hpp): tensor k's
// state shape, a TensorState over buffers of that shape (TableStepper::entry's contract), and the refusal
// (InputError, naming the tensor) of a table of states whose length or shapes do not fit, checking the tensors
// the step reads in `fragment` -- all of them when `grads` is empty, else those whose gradient pointer is given.
TensorStateShape tensor_state_shape(const StepPlanner& planner, const std::vector<std::size_t>& first_chunk,
                                    std::size_t k);
TensorState tensor_state_entry(const StepPlanner& planner, const std::vector<std::size_t>& first_chunk, std::size_t k,
                               std::span<void* const> buffers);
void check_state_shapes(const StepPlanner& planner, const std::vector<std::size_t>& first_chunk,
                        const std::vector<std::size_t>& chunk_tensor, std::span<const TensorState> states,
                        std::span<const float* const> grads, std::size_t fragment);

// Chunks [first_chunk, end_chunk) of one launch, which lie in tensors [first_tensor, end_tensor).
struct TableLaunch {
  std::size_t first_chunk = 0, end_chunk = 0;
  std::size_t first_tensor = 0, end_tensor = 0;
};
// Chunks [first, end) (one fragment's, so their tensors ascend) cut into launches of at most `batch` tensors each.
std::vector<TableLaunch> table_launches(const std::vector<std::size_t>& chunk_tensor, std::size_t first,
                                        std::size_t end, std::size_t batch);

// The pointers a CUDA table launch carries for its tensors [launch.first_tensor, launch.end_tensor): each tensor's
// first element and first slot, Δ, θ (none in a preview: `params` empty) and its own state (none in a preview, nor
// for a tensor left out: `states` empty or its gradient null). Each moment's values are whichever of the
// TensorState's spans the format fills (fp32, fp32 fallback, bf16 or q8 codes), its absmax the q8 one.
agent::TensorBatch table_batch(const TableLaunch& launch, const std::vector<std::size_t>& tensor_begin,
                               const std::vector<std::size_t>& first_slot, std::span<void* const> params,
                               std::span<const float* const> grads, std::span<const TensorState> states);

// Refuses (InputError) a tensor table whose length is not the layout's tensor count, or that holds a null pointer
// for a tensor of which the step reads or writes anything: tensors[first..last] (empty when first > last).
template <class T>
void check_table(const char* what, std::span<T* const> pointers, std::size_t tensors, std::size_t first,
                 std::size_t last, const std::vector<std::size_t>& sizes) {
  if (pointers.size() != tensors) {
    throw core::InputError(std::string("the tensor table has ") + std::to_string(pointers.size()) + " " + what +
                           " pointers, the optimizer " + std::to_string(tensors) + " tensors");
  }
  for (std::size_t k = first; k <= last && k < tensors; ++k) {
    if (pointers[k] == nullptr && sizes[k] != 0) {
      throw core::InputError(std::string("the tensor table's ") + what + " pointer for tensor " + std::to_string(k) +
                             " (" + std::to_string(sizes[k]) + " elements, read by this step) is null");
    }
  }
}

// The table step's refusals (InputError; both backends): tables of the layout's tensor count, and a parameter
// pointer for every tensor of `touched` (table_stepper.hpp's touched(): first > last for none) whose gradient pointer
// is given; a tensor whose gradient pointer is null is left out of the step, and a step with every touched tensor
// left out is refused.
template <class P>
void check_step_table(std::span<P* const> params, std::span<const float* const> grads,
                      const std::vector<std::size_t>& sizes, std::pair<std::size_t, std::size_t> touched) {
  const auto [first, last] = touched;
  check_table("parameter", params, sizes.size(), 1, 0, sizes);
  check_table("gradient", grads, sizes.size(), 1, 0, sizes);
  bool any = first > last;  // a fragment without elements is the planner's to judge
  for (std::size_t k = first; k <= last && k < sizes.size(); ++k) {
    if (grads[k] == nullptr || sizes[k] == 0) continue;
    any = true;
    if (params[k] == nullptr) {
      throw core::InputError("the tensor table's parameter pointer for tensor " + std::to_string(k) +
                             " (stepped: its gradient is given) is null");
    }
  }
  if (!any) throw core::InputError("every tensor of this step is left out (no gradient pointer is given)");
}

// The owning optimizers' table (CpuOptimizer's, CudaOptimizer's) must hold every pointer its step reads: a
// caller-owned state's step leaves out a tensor of null gradient, but these optimizers' callers have no such tensor.
template <class P>
void check_full_table(std::span<P* const> params, std::span<const float* const> grads,
                      const std::vector<std::size_t>& sizes, std::pair<std::size_t, std::size_t> touched) {
  check_table("gradient", grads, sizes.size(), touched.first, touched.second, sizes);
  check_table("parameter", params, sizes.size(), touched.first, touched.second, sizes);
}

// The first and last tensor with elements in `fragment` (first > last when there are none, or the fragment does
// not exist: the step's plan refuses it).
std::pair<std::size_t, std::size_t> touched_tensors(const StepPlanner& planner,
                                                    const std::vector<std::size_t>& chunk_tensor, std::size_t fragment);

}  // namespace cgad::fastpath
