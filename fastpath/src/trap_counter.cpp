#include "cgad/fastpath/trap_counter.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace cgad::fastpath {
namespace {

double zero_share(std::span<const float> x) {
  if (x.empty()) return 0.0;
  return static_cast<double>(std::count(x.begin(), x.end(), 0.0f)) / static_cast<double>(x.size());
}

// |Δθ|/η of each element, counted into `tally`; `lr(i)` is element i's η.
template <class LearningRate>
void count_steps(TrapTally& tally, std::span<const float> before, std::span<const float> after,
                 const LearningRate& lr) {
  if (before.size() != after.size()) {
    throw core::InputError("trap counter: " + std::to_string(before.size()) + " elements before the step, " +
                           std::to_string(after.size()) + " after");
  }
  for (std::size_t i = 0; i < after.size(); ++i) {
    const double moved = std::fabs(static_cast<double>(after[i]) - static_cast<double>(before[i])) / lr(i);
    tally.over += moved > TrapTally::kStepLimit;
    tally.max_step = std::max(tally.max_step, moved);
  }
  tally.element_steps += after.size();
}

}  // namespace

void TrapTally::add(std::span<const float> before, std::span<const float> after, std::span<const double> lr) {
  count_steps(*this, before, after, [lr](std::size_t i) { return lr[i]; });
}

void TrapTally::add(std::span<const float> before, std::span<const float> after, double lr) {
  count_steps(*this, before, after, [lr](std::size_t) { return lr; });
}

void TrapTally::add(const TrapTally& other) {
  element_steps += other.element_steps;
  over += other.over;
  max_step = std::max(max_step, other.max_step);
}

TrapCounts trap_counts(const TrapTally& tally, std::span<const float> v, std::span<const float> m) {
  TrapCounts c;
  c.v_zero_fraction = zero_share(v);
  c.m_zero_fraction = zero_share(m);
  c.step_over_5lr_fraction =
      tally.element_steps == 0 ? 0.0 : static_cast<double>(tally.over) / static_cast<double>(tally.element_steps);
  c.max_step_over_lr = tally.max_step;
  return c;
}

TrapCounter::TrapCounter(std::vector<double> lr, std::vector<std::size_t> tensors)
    : lr_(std::move(lr)), before_(lr_.size()) {
  if (tensors.empty()) tensors.push_back(lr_.size());
  tensor_begin_.push_back(0);
  for (const std::size_t size : tensors) tensor_begin_.push_back(tensor_begin_.back() + size);
  if (tensor_begin_.back() != lr_.size()) {
    throw core::InputError("trap counter: the tensors hold " + std::to_string(tensor_begin_.back()) +
                           " elements, the learning rates " + std::to_string(lr_.size()));
  }
  tallies_.resize(tensors.size());
}

void TrapCounter::after(std::span<const float> theta) {
  for (std::size_t k = 0; k + 1 < tensor_begin_.size(); ++k) {
    const std::size_t begin = tensor_begin_[k], size = tensor_begin_[k + 1] - begin;
    tallies_[k].add(std::span<const float>(before_).subspan(begin, size), theta.subspan(begin, size),
                    std::span<const double>(lr_).subspan(begin, size));
  }
}

TrapCounts TrapCounter::summary(std::span<const float> v, std::span<const float> m) const {
  TrapTally all;
  for (const TrapTally& t : tallies_) all.add(t);
  return trap_counts(all, v, m);
}

std::size_t TrapCounter::bytes_per_tensor() {
  return sizeof(std::size_t) + sizeof(TrapTally);
}

std::vector<TrapCounts> TrapCounter::tensor_summaries(std::span<const float> v, std::span<const float> m) const {
  std::vector<TrapCounts> out;
  for (std::size_t k = 0; k < tallies_.size(); ++k) {
    const std::size_t begin = tensor_begin_[k], size = tensor_begin_[k + 1] - begin;
    out.push_back(trap_counts(tallies_[k], v.subspan(begin, size), m.empty() ? m : m.subspan(begin, size)));
  }
  return out;
}

}  // namespace cgad::fastpath
