#pragma once
// The v-zero trap of 8-bit state (docs/results/noise.md), counted along a run of the fast path: the share of
// elements whose stored v decodes to exactly 0, and over every element-step the share whose |Δθ| exceeded 5η
// (Adam's step is at most ~η·(1−β1)/sqrt(1−β2) ≈ 3.2η in exact arithmetic at the defaults, and ≲ η once the
// moments warm up) with the largest |Δθ|/η, η the element's learning rate (per tensor under μP). The one counter of
// the rounding-noise study (differential/noise_lockstep.hpp), the simulation's runs (simulate/) and cgad.torch's
// trap_stats() (python/cgad/torch/_trap_stats.py, through the module's TrapTally), so all report the same quantity.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace cgad::fastpath {

struct TrapCounts {
  // m_zero_fraction: the share whose stored m decodes to exactly 0 (0 when m was not given).
  double v_zero_fraction = 0, step_over_5lr_fraction = 0, max_step_over_lr = 0, m_zero_fraction = 0;
};

// The steps of a set of elements: how many element-steps, how many moved past kStepLimit·η, the largest |Δθ|/η.
struct TrapTally {
  static constexpr double kStepLimit = 5.0;  // in units of η (see above)
  std::uint64_t element_steps = 0, over = 0;
  double max_step = 0;

  // One step of elements from `before` to `after` (widened to float), element i at learning rate lr[i]; or every
  // element at the one learning rate `lr`.
  void add(std::span<const float> before, std::span<const float> after, std::span<const double> lr);
  void add(std::span<const float> before, std::span<const float> after, double lr);
  void add(const TrapTally& other);
};

// The counts of `tally` with the shares of zeros in `v` and `m` (every element's stored v and m, decoded; m may be
// empty).
TrapCounts trap_counts(const TrapTally& tally, std::span<const float> v, std::span<const float> m = {});

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
  std::vector<double> lr_;
  std::vector<std::size_t> tensor_begin_;  // tensor k's first element; one more entry than tensors
  std::vector<float> before_;
  std::vector<TrapTally> tallies_;  // per tensor
};

}  // namespace cgad::fastpath
