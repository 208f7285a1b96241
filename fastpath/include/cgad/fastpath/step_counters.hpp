#pragma once
// An optimizer's step counters as its state file stores them (CpuOptimizer::raw_counters, state_file.hpp): Adam's
// step count t per fragment, PA-CGAD's last synchronization round per fragment, the round, and the applied steps.
#include <cstdint>
#include <vector>

namespace cgad::fastpath {

struct StepCounters {
  std::vector<std::int64_t> t;
  std::vector<std::int64_t> last_sync;  // per fragment, −1 before the first synchronization
  std::int64_t round = 0;
  std::uint64_t steps = 0;
};

}  // namespace cgad::fastpath
