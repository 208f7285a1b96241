#pragma once
// A tensor's optimizer state as both backends' table steps take it (TableStepper, table_stepper.hpp;
// CudaTableStepper, cuda_table_stepper.hpp), alone in a header so that the fast path's detail/ headers name it
// without including a stepper's public header.
#include "cgad/fastpath/bf16.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace cgad::fastpath {

// One tensor's optimizer state: per moment (m, v; or b), the fp32 or bf16 values (one per element), or in a q8
// configuration the codes (one per element) and the absmax of each of the tensor's chunks -- or, for a tensor under
// min_q8_size (fp32_fallback), its fp32 moments in `fp32`. A step reads and writes exactly these; the caller owns
// them (TableStepper::entry makes one from buffer pointers; CpuOptimizer::tensor_state gives its own).
struct TensorState {
  int moments = 0;
  bool fp32_fallback = false;
  std::span<float> fp32[2];
  std::span<bf16> bf16_values[2];
  std::span<std::uint8_t> codes[2];
  std::span<float> absmax[2];
};

// What a tensor's state is made of: its kind ("fp32", "bf16", "q8" or "fp32-fallback"), the moments, and the
// lengths of each moment's buffers (values: elements of the values or codes; absmax: the q8 chunks, else 0).
struct TensorStateShape {
  std::string_view kind;
  int moments = 0;
  std::size_t values = 0;
  std::size_t absmax = 0;
  std::uint8_t initial_code[2] = {0, 0};  // q8: the code of each moment's all-zero state (HostState::zeros')
};

}  // namespace cgad::fastpath
