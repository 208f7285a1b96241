#pragma once
// The random bits behind stochastic rounding: Random123's Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011), a counter-based generator. The counter is (element index, step)
// and the key is the user's seed, so the bits for one element at one step are a pure function of
// (seed, step, index): identical on the CPU and the GPU, for any thread count, and reproducible.
// One call gives four 32-bit words; each stored quantity takes its own word, so they are independent.
#include "cgad/fastpath/portable.hpp"

#include <Random123/philox.h>

#include <cstdint>

namespace cgad::fastpath {

// Which of the four Philox output words each rounded quantity uses.
enum RandomWord : int { kWordParam = 0, kWordFirstMoment = 1, kWordSecondMoment = 2 };

struct RandomWords {
  std::uint32_t word[4];
};

CGAD_HD inline RandomWords philox_words(std::uint64_t seed, std::uint64_t step, std::uint64_t index) {
  r123::Philox4x32 generator;
  const r123::Philox4x32::ctr_type counter = {
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), static_cast<std::uint32_t>(step),
       static_cast<std::uint32_t>(step >> 32)}};
  const r123::Philox4x32::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type out = generator(counter, key);
  return RandomWords{{out.v[0], out.v[1], out.v[2], out.v[3]}};
}

}  // namespace cgad::fastpath
