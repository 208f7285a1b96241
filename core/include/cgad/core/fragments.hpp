#pragma once
// Contiguous fragments of a parameter vector (docs/design.md §3, PA-CGAD). Fragment f covers
// [⌊f·n/P⌋, ⌊(f+1)·n/P⌋): sizes differ by at most one, and no fragment may be empty.
#include "cgad/core/errors.hpp"

#include <cstddef>
#include <string>

namespace cgad::core {

class FragmentLayout {
 public:
  FragmentLayout(std::size_t parameters, std::size_t fragments) : n_(parameters), p_(fragments) {
    if (p_ == 0) throw InputError("the number of fragments must be >= 1");
    if (p_ > n_) {
      throw InputError("empty fragment: " + std::to_string(p_) + " fragments over " + std::to_string(n_) +
                       " parameters");
    }
  }
  std::size_t parameters() const { return n_; }
  std::size_t fragments() const { return p_; }
  std::size_t offset(std::size_t f) const { return boundary(f); }
  std::size_t size(std::size_t f) const { return boundary(f + 1) - boundary(f); }

 private:
  // 128-bit product: f·n overflows 64 bits only past 2^32 fragments of 2^32 parameters, but costs nothing.
  std::size_t boundary(std::size_t f) const {
    return static_cast<std::size_t>(static_cast<unsigned __int128>(f) * n_ / p_);
  }
  std::size_t n_;
  std::size_t p_;
};

}  // namespace cgad::core
