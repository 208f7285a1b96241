#pragma once
// The whole state and planner of a CpuOptimizer, for the tests that compare it bit for bit (against the CUDA
// backend, a reloaded file, another configuration) -- not part of the public API (docs/design.md §2).
#include "cgad/fastpath/detail/host_state.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/fastpath.hpp"

namespace cgad::fastpath::detail {

struct CpuOptimizerInternals {
  static const HostState& state(const CpuOptimizer& optimizer);
  static const StepPlanner& planner(const CpuOptimizer& optimizer);
};

inline const HostState& host_state_of(const CpuOptimizer& optimizer) {
  return CpuOptimizerInternals::state(optimizer);
}

}  // namespace cgad::fastpath::detail
