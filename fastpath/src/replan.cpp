#include "cgad/fastpath/detail/replan.hpp"

#include "cgad/fastpath/fastpath.hpp"

namespace cgad::fastpath {

StepPlanner replan(const StepPlanner& now, const StepConfig& next) {
  require_same_state_layout(now.config(), next);
  StepPlanner out(next, now.tensor_sizes());
  out.set_raw_counters(now.raw_counters());
  return out;
}

}  // namespace cgad::fastpath
