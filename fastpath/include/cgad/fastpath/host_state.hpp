#pragma once
// The optimizer state as it lives in host memory: one or two moment buffers (m, v for the Adam family; b for
// Nesterov) in fp32, bf16 or q8 (codes + one fp32 absmax per block of each fragment). The CPU backend steps
// it in place; save/load serialize it; the CUDA backend mirrors it on the device.
#include "cgad/fastpath/block_step.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/q8_maps.hpp"
#include "cgad/fastpath/step_planner.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cgad::fastpath {

struct HostState {
  StateFormat format = StateFormat::fp32;
  int moments = 2;
  std::vector<float> fp32[2];
  std::vector<bf16> half[2];
  std::vector<std::uint8_t> codes[2];
  std::vector<float> absmax[2];

  // All-zero state for `planner`'s optimizer (q8 codes point at the map's exact zero, absmax 0).
  static HostState zeros(const StepPlanner& planner);

  // Fills plan.args' moment pointers for the planned fragment.
  void bind(StepPlanner::Plan& plan);
  // Dequantized moment `k` as float, for every parameter.
  void read(const StepPlanner& planner, int k, std::span<float> out) const;
  // Same shape (format, moment count, lengths) as `other`.
  bool same_shape(const HostState& other) const;
};

// The map index of 0 in each q8 map.
std::uint8_t zero_code(Q8MapKind kind);

}  // namespace cgad::fastpath
