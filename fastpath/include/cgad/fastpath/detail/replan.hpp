#pragma once
// New hyperparameters for an optimizer that keeps its state: both backends' set_hyperparameters (an lr schedule).
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"

namespace cgad::fastpath {

// A planner for `next` over `now`'s tensors, holding `now`'s counters. Refuses (InputError) what
// require_same_state_layout refuses (fastpath.hpp: the state's shape and meaning must stay), and invalid values;
// `now` is not changed either way. The same layout gives the same chunks, so a backend's state, chunk tables and
// chunk → tensor map stay valid; only the schedule's constants (and PA-CGAD's table of σ(a)) change.
StepPlanner replan(const StepPlanner& now, const StepConfig& next);

}  // namespace cgad::fastpath
