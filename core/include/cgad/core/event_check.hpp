#pragma once
// The checks every backend makes of one pseudo-gradient event (Δ, τ, fragment) before it reads a value, each with
// its one message, so that the reference (reference/outer_optimizer.hpp) and the fast path (StepPlanner::prepare)
// refuse the same events in the same words: the parameter vector's length, the fragment's index, Δ's length
// against that fragment's, and τ ≥ 0. Comparisons only, no arithmetic on the values (docs/design.md §2).
#include "cgad/core/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace cgad::core {

// `parameters` and `fragments`: what the optimizer holds; `fragment_size(f)`: fragment f's length, asked only of
// an f below `fragments`.
template <class FragmentSize>
void check_event(std::size_t params_size, std::size_t grad_size, std::int64_t tau, std::size_t fragment,
                 std::size_t parameters, std::size_t fragments, const FragmentSize& fragment_size) {
  if (params_size != parameters) {
    throw InputError("parameter vector has " + std::to_string(params_size) + " elements, the optimizer " +
                     std::to_string(parameters));
  }
  if (fragment >= fragments) {
    throw InputError("fragment " + std::to_string(fragment) + " does not exist (there are " +
                     std::to_string(fragments) + ")");
  }
  const std::size_t size = fragment_size(fragment);
  if (grad_size != size) {
    throw InputError("pseudo-gradient has " + std::to_string(grad_size) + " elements, fragment " +
                     std::to_string(fragment) + " has " + std::to_string(size));
  }
  if (tau < 0) throw InputError("staleness tau must be >= 0, got " + std::to_string(tau));
}

}  // namespace cgad::core
