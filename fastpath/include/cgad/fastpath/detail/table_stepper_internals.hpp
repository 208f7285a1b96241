#pragma once
// A TableStepper's planner, for CpuOptimizer (its state file and buffers: fastpath/src/cpu_optimizer.cpp) and the
// tests that compare state bit for bit -- not part of the public API (docs/design.md §2).
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/table_stepper.hpp"

namespace cgad::fastpath::detail {

struct TableStepperInternals {
  static const StepPlanner& planner(const TableStepper& stepper);
};

}  // namespace cgad::fastpath::detail
