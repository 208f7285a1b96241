#include "cgad/differential/trap_counter.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <cmath>

namespace cgad::differential {
namespace {

double zero_share(std::span<const float> x) {
  if (x.empty()) return 0.0;
  return static_cast<double>(std::count(x.begin(), x.end(), 0.0f)) / static_cast<double>(x.size());
}

}  // namespace

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
    Tally& tally = tallies_[k];
    for (std::size_t i = tensor_begin_[k]; i < tensor_begin_[k + 1]; ++i) {
      const double moved = std::fabs(static_cast<double>(theta[i]) - static_cast<double>(before_[i])) / lr_[i];
      tally.over += moved > kStepLimit;
      tally.max_step = std::max(tally.max_step, moved);
    }
    tally.element_steps += tensor_begin_[k + 1] - tensor_begin_[k];
  }
}

TrapCounts TrapCounter::counts(const Tally& tally, std::span<const float> v, std::span<const float> m) const {
  TrapCounts c;
  c.v_zero_fraction = zero_share(v);
  c.m_zero_fraction = zero_share(m);
  c.step_over_5lr_fraction =
      tally.element_steps == 0 ? 0.0 : static_cast<double>(tally.over) / static_cast<double>(tally.element_steps);
  c.max_step_over_lr = tally.max_step;
  return c;
}

TrapCounts TrapCounter::summary(std::span<const float> v, std::span<const float> m) const {
  Tally all;
  for (const Tally& t : tallies_) {
    all.element_steps += t.element_steps;
    all.over += t.over;
    all.max_step = std::max(all.max_step, t.max_step);
  }
  return counts(all, v, m);
}

std::size_t TrapCounter::bytes_per_tensor() {
  return sizeof(std::size_t) + sizeof(Tally);
}

std::vector<TrapCounts> TrapCounter::tensor_summaries(std::span<const float> v, std::span<const float> m) const {
  std::vector<TrapCounts> out;
  for (std::size_t k = 0; k < tallies_.size(); ++k) {
    const std::size_t begin = tensor_begin_[k], size = tensor_begin_[k + 1] - begin;
    out.push_back(counts(tallies_[k], v.subspan(begin, size), m.empty() ? m : m.subspan(begin, size)));
  }
  return out;
}

}  // namespace cgad::differential
