#pragma once
// The v-zero trap of 8-bit state (docs/results/noise.md), counted along a run of the fast path: the share of
// elements whose stored v decodes to exactly 0, and over every element-step the share whose |Δθ| exceeded 5η
// (Adam's step is at most ~η·(1−β1)/sqrt(1−β2) ≈ 3.2η in exact arithmetic at the defaults, and ≲ η once the
// moments warm up) with the largest |Δθ|/η, η the element's learning rate (per tensor under μP). One counter for
// the rounding-noise study (differential/noise_lockstep.hpp) and the simulation's runs (simulate/), so the two
// report the same quantity.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace cgad::fastpath {

struct TrapCounts {
  double v_zero_fraction = 0, step_over_5lr_fraction = 0, max_step_over_lr = 0;
};

class TrapCounter {
 public:
  // `lr` per element (the learning rate its step is measured in).
  explicit TrapCounter(std::vector<double> lr) : lr_(std::move(lr)), before_(lr_.size()) {}
  // θ before and after one event (widened to float).
  void before(std::span<const float> theta) { before_.assign(theta.begin(), theta.end()); }
  void after(std::span<const float> theta);
  // `v`: every element's stored v, decoded.
  TrapCounts summary(std::span<const float> v) const;

 private:
  static constexpr double kStepLimit = 5.0;  // in units of η (see above)
  std::vector<double> lr_;
  std::vector<float> before_;
  std::uint64_t element_steps_ = 0, over_ = 0;
  double max_step_ = 0;
};

}  // namespace cgad::fastpath
