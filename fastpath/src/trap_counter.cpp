#include "cgad/fastpath/trap_counter.hpp"

#include <algorithm>
#include <cmath>

namespace cgad::fastpath {

void TrapCounter::after(std::span<const float> theta) {
  for (std::size_t i = 0; i < theta.size(); ++i) {
    const double moved = std::fabs(static_cast<double>(theta[i]) - static_cast<double>(before_[i])) / lr_[i];
    over_ += moved > kStepLimit;
    max_step_ = std::max(max_step_, moved);
  }
  element_steps_ += theta.size();
}

TrapCounts TrapCounter::summary(std::span<const float> v) const {
  const std::size_t zeros = static_cast<std::size_t>(std::count(v.begin(), v.end(), 0.0f));
  return {v.empty() ? 0.0 : static_cast<double>(zeros) / static_cast<double>(v.size()),
          element_steps_ == 0 ? 0.0 : static_cast<double>(over_) / static_cast<double>(element_steps_), max_step_};
}

}  // namespace cgad::fastpath
