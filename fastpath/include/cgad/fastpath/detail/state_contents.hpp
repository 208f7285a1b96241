#pragma once
// Whether an optimizer state is one some run of steps reaches (finite moments in their ranges, m bounded by v):
// what the state file's loader checks after the checksum (state_file.cpp), and what a caller-owned state is checked
// against before a step (table_stepper.hpp), read where it lies. state_contents.cpp derives the bounds.
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/tensor_state.hpp"

#include <functional>
#include <string>

namespace cgad::fastpath {

// Calls fail(why) (which must throw) for the first impossible value of `state`, its indices counted in its spans.
void check_state_contents(const TensorState& state, const StepConfig& config, bool adam_family,
                          const std::function<void(const std::string&)>& fail);

}  // namespace cgad::fastpath
