#pragma once
// The v-zero trap of 8-bit state (docs/results/noise.md), counted along a run of the fast path: the share of
// elements whose stored v decodes to exactly 0, and over every element-step the share whose |Δθ| exceeded 5η
// (Adam's step is at most ~η·(1−β1)/sqrt(1−β2) ≈ 3.2η in exact arithmetic at the defaults, and ≲ η once the
// moments warm up) with the largest |Δθ|/η, η the element's learning rate (per tensor under μP). One counter for
// the rounding-noise study (differential/noise_lockstep.hpp) and the simulation's runs (simulate/), so the two
// report the same quantity.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace cgad::differential {

struct TrapCounts {
  // m_zero_fraction: the share whose stored m decodes to exactly 0 (0 when m was not given).
  double v_zero_fraction = 0, step_over_5lr_fraction = 0, max_step_over_lr = 0, m_zero_fraction = 0;
};

class TrapCounter {
 public:
  // `lr` per element (the learning rate its step is measured in); `tensors`: the sizes of the tensors the elements
  // form, in order, summing to lr.size(), for tensor_summaries (empty: one tensor of every element).
  explicit TrapCounter(std::vector<double> lr, std::vector<std::size_t> tensors = {});
  // θ before and after one event (widened to float).
  void before(std::span<const float> theta) { before_.assign(theta.begin(), theta.end()); }
  void after(std::span<const float> theta);
  // `v`, `m`: every element's stored v and m, decoded (m may be empty).
  TrapCounts summary(std::span<const float> v, std::span<const float> m = {}) const;
  // The same, per tensor.
  std::vector<TrapCounts> tensor_summaries(std::span<const float> v, std::span<const float> m = {}) const;
  // What the counter holds per tensor (its first element and its tally), for memory estimates.
  static std::size_t bytes_per_tensor();

 private:
  static constexpr double kStepLimit = 5.0;  // in units of η (see above)
  struct Tally {
    std::uint64_t element_steps = 0, over = 0;
    double max_step = 0;
  };
  TrapCounts counts(const Tally& tally, std::span<const float> v, std::span<const float> m) const;

  std::vector<double> lr_;
  std::vector<std::size_t> tensor_begin_;  // tensor k's first element; one more entry than tensors
  std::vector<float> before_;
  std::vector<Tally> tallies_;  // per tensor
};

}  // namespace cgad::differential
