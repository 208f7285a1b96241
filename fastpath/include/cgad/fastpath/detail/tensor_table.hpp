#pragma once
// What both backends' table steps (a pointer per tensor of the layout, the caller's tensors where they lie) know of
// the layout: where each tensor starts, which tensor holds each chunk, the refusal of a bad table, and — for the
// CUDA backend, whose launches carry at most agent::kTableBatch tensors' pointers — how a fragment's chunks split
// into launches.
#include "cgad/fastpath/detail/step_planner.hpp"
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

// Chunks [first_chunk, end_chunk) of one launch, which lie in tensors [first_tensor, end_tensor).
struct TableLaunch {
  std::size_t first_chunk = 0, end_chunk = 0;
  std::size_t first_tensor = 0, end_tensor = 0;
};
// Chunks [first, end) (one fragment's, so their tensors ascend) cut into launches of at most `batch` tensors each.
std::vector<TableLaunch> table_launches(const std::vector<std::size_t>& chunk_tensor, std::size_t first,
                                        std::size_t end, std::size_t batch);

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

// The first and last tensor with elements in `fragment` (first > last when there are none, or the fragment does
// not exist: the step's plan refuses it).
std::pair<std::size_t, std::size_t> touched_tensors(const StepPlanner& planner,
                                                    const std::vector<std::size_t>& chunk_tensor, std::size_t fragment);

}  // namespace cgad::fastpath
