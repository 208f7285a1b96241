#pragma once
// The one source of random numbers of cgad's experiments (the simulation, the rounding-noise study): Random123's
// Philox4x32-10 (the generator the fast path's stochastic rounding uses, fastpath/detail/random_bits.hpp), keyed by a
// seed, with the counter holding (draw index, stream id). Streams with different ids under one seed are independent,
// and a stream's values are a pure function of (seed, stream id, position): a worker's draws do not depend on how many
// other workers there are or in which order the engine runs them.
//
// The transforms are written out (std::normal_distribution's and std::uniform_real_distribution's algorithms
// are implementation-defined, so their draws differ between standard libraries):
// one Philox call gives four 32-bit words, i.e. two 53-bit uniforms u1 ∈ (0, 1] and u2 ∈ [0, 1), and the
// Box–Muller transform r = sqrt(−2 ln u1), z0 = r·cos(2π u2), z1 = r·sin(2π u2) turns them into two
// independent N(0, 1) values (u1 > 0, so r is finite: |z| ≤ sqrt(2·53·ln 2) ≈ 8.57). The uniforms are exact
// on every platform; log, sin and cos come from the C library, so the last bits of a normal (and a run's bits)
// are guaranteed the same on one platform and library version, not across them. uniform() takes one Philox call
// of its own (the 53-bit uniform of its first two words), exact on every platform.
#include <Random123/philox.h>

#include <cstdint>

namespace cgad::reference {

// Stream ids: the purpose in the high 32 bits, an index (the worker) in the low 32 bits.
enum class StreamPurpose : std::uint32_t {
  initial_point = 1,  // run seed: the starting parameters
  worker = 2,         // run seed: worker k's stochastic gradients (index k)
  teacher = 3,        // problem seed: teacher weights
  evaluation = 4,     // problem seed: the evaluation inputs
  noise_scales = 5,   // noise study seed: each element's scale
  noise_initial = 6,  // noise study seed: the starting parameters
  noise_events = 7,   // noise study seed: the pseudo-gradients (normals) and which elements are exactly 0
  noise_delays = 8,   // noise study seed: the events' delays
};

class PhiloxStream {
 public:
  PhiloxStream(std::uint64_t seed, StreamPurpose purpose, std::uint32_t index = 0)
      : key_{{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}},
        purpose_(static_cast<std::uint32_t>(purpose)),
        index_(index) {}

  // A standard normal (defined in reference/src/random.cpp, as the transforms' arithmetic is the library's to
  // compile: docs/design.md §2).
  double normal();

  // A uniform in [0, 1), a multiple of 2^-53.
  double uniform();

 private:
  r123::Philox4x32::ctr_type draw() {
    const r123::Philox4x32::ctr_type counter = {
        {static_cast<std::uint32_t>(position_), static_cast<std::uint32_t>(position_ >> 32), index_, purpose_}};
    ++position_;
    return r123::Philox4x32()(counter, key_);
  }
  static std::uint64_t bits53(std::uint32_t high, std::uint32_t low) {
    return ((static_cast<std::uint64_t>(high) << 32) | low) >> 11;
  }

  r123::Philox4x32::key_type key_;
  std::uint32_t purpose_;
  std::uint32_t index_;
  std::uint64_t position_ = 0;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace cgad::reference
