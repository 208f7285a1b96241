#pragma once
// One step over one block of at most 256 elements, in pieces both backends share: decode the stored
// parameter and moments to fp32, run the per-element update (element_update.hpp), round the parameter
// back, and requantize the moments — from the fp32 values the update produced (DESIGN.md §5: θ is updated
// from the pre-quantization moments). A q8 moment's new absmax is the block's max |value|, which is exact
// and independent of the order of the reduction, so a CUB BlockReduce and a serial loop agree.
//
// Blocks are laid out per fragment (a fragment's first element starts a block), so updating one PA-CGAD
// fragment never requantizes another fragment's state.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/element_update.hpp"
#include "cgad/fastpath/portable.hpp"
#include "cgad/fastpath/q8.hpp"
#include "cgad/fastpath/random_bits.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::fastpath {

// Plain-integer copies of the format enums, so the POD below crosses to the GPU unchanged.
enum class UpdateFamily : std::uint8_t { adam, nesterov };
enum class ParamCode : std::uint8_t { fp32, bf16 };
enum class StateCode : std::uint8_t { fp32, bf16, q8 };

// One moment buffer, already offset to the fragment being stepped.
struct MomentView {
  float* fp32 = nullptr;
  bf16* half = nullptr;
  std::uint8_t* codes = nullptr;
  float* absmax = nullptr;  // one per block of the fragment
  const Q8Map* map = nullptr;
  int random_word = 0;
};

// Everything one step needs, by value: pointers are to the fragment's slice.
struct StepArgs {
  UpdateFamily family = UpdateFamily::adam;
  ParamCode params = ParamCode::fp32;
  StateCode state = StateCode::fp32;
  bool stochastic = false;
  int moments = 2;  // 2 for the Adam family (m, v), 1 for Nesterov (b)
  AdamCoefficients adam{};
  NesterovCoefficients nesterov{};
  std::uint64_t seed = 0;
  std::uint64_t step = 0;          // the optimizer's applied-step count after this step (keys the RNG)
  std::uint64_t first_index = 0;   // global index of the fragment's first element (keys the RNG)
  std::uint64_t size = 0;          // elements in the fragment
  float* params_fp32 = nullptr;
  bf16* params_bf16 = nullptr;
  const float* grad = nullptr;
  MomentView moment[2];
};

// The largest |value| of a block, accumulated as max(acc, |x|) = (acc < |x|) ? |x| : acc on both backends.
CGAD_HD inline float absmax_step(float accumulated, float value) {
  const float magnitude = value < 0.0f ? -value : value;
  return accumulated < magnitude ? magnitude : accumulated;
}

CGAD_HD inline std::uint64_t block_count(std::uint64_t size) { return (size + kQ8BlockSize - 1) / kQ8BlockSize; }

// Which formats a step runs is read through a policy F: RuntimeFormats reads StepArgs (the CUDA kernel, where
// the branches are uniform across a warp and one kernel serves every configuration), FixedFormats<...> fixes
// them at compile time (the CPU backend instantiates one block loop per configuration so the per-element
// branches fold away). Both run the very same code below.
struct RuntimeFormats {
  CGAD_HD static UpdateFamily family(const StepArgs& a) { return a.family; }
  CGAD_HD static ParamCode params(const StepArgs& a) { return a.params; }
  CGAD_HD static StateCode state(const StepArgs& a) { return a.state; }
  CGAD_HD static bool stochastic(const StepArgs& a) { return a.stochastic; }
};

template <UpdateFamily Family, ParamCode Params, StateCode State, bool Stochastic>
struct FixedFormats {
  CGAD_HD static constexpr UpdateFamily family(const StepArgs&) { return Family; }
  CGAD_HD static constexpr ParamCode params(const StepArgs&) { return Params; }
  CGAD_HD static constexpr StateCode state(const StepArgs&) { return State; }
  CGAD_HD static constexpr bool stochastic(const StepArgs&) { return Stochastic; }
};

template <class F = RuntimeFormats>
CGAD_HD inline float load_param(const StepArgs& a, std::uint64_t i) {
  return F::params(a) == ParamCode::fp32 ? a.params_fp32[i] : to_float(a.params_bf16[i]);
}

template <class F = RuntimeFormats>
CGAD_HD inline void store_param(const StepArgs& a, std::uint64_t i, float value, const RandomWords& random) {
  if (F::params(a) == ParamCode::fp32) {
    a.params_fp32[i] = value;
  } else {
    a.params_bf16[i] = F::stochastic(a) ? round_stochastic_bf16(value, random.word[kWordParam])
                                        : round_nearest_even_bf16(value);
  }
}

// `block_absmax` is the block's stored absmax (used by q8 only).
template <class F = RuntimeFormats>
CGAD_HD inline float load_moment(const StepArgs& a, const MomentView& s, std::uint64_t i, float block_absmax) {
  switch (F::state(a)) {
    case StateCode::fp32: return s.fp32[i];
    case StateCode::bf16: return to_float(s.half[i]);
    case StateCode::q8: return q8_dequantize(s.codes[i], block_absmax, *s.map);
  }
  return 0.0f;
}

// fp32 and bf16 moments are stored element by element; q8 ones after the block's absmax is known.
template <class F = RuntimeFormats>
CGAD_HD inline void store_moment_elementwise(const StepArgs& a, const MomentView& s, std::uint64_t i, float value,
                                             const RandomWords& random) {
  if (F::state(a) == StateCode::fp32) {
    s.fp32[i] = value;
  } else if (F::state(a) == StateCode::bf16) {
    s.half[i] = F::stochastic(a) ? round_stochastic_bf16(value, random.word[s.random_word])
                                 : round_nearest_even_bf16(value);
  }
}

template <class F = RuntimeFormats>
CGAD_HD inline std::uint8_t quantize_moment(const StepArgs& a, const MomentView& s, float value, float absmax,
                                            const RandomWords& random) {
  const float x = q8_normalize(value, absmax);
  return F::stochastic(a) ? q8_stochastic(x, *s.map, random.word[s.random_word]) : q8_nearest(x, *s.map);
}

template <class F = RuntimeFormats>
CGAD_HD inline RandomWords random_for(const StepArgs& a, std::uint64_t i) {
  if (!F::stochastic(a)) return RandomWords{{0, 0, 0, 0}};
  return philox_words(a.seed, a.step, a.first_index + i);
}

// Updates element i (fragment-relative) with pseudo-gradient `delta` (the caller loaded grad[i], the CUDA
// kernel through a vectorized BlockLoad): reads θ and the decoded moments, writes θ, returns the new fp32
// moments in `moment_out`.
template <class F = RuntimeFormats>
CGAD_HD inline void update_element(const StepArgs& a, std::uint64_t i, float delta, const float* block_absmax,
                                   float* moment_out, const RandomWords& random) {
  float theta = load_param<F>(a, i);
  float first = load_moment<F>(a, a.moment[0], i, block_absmax[0]);
  if (F::family(a) == UpdateFamily::adam) {
    float second = load_moment<F>(a, a.moment[1], i, block_absmax[1]);
    adam_element(delta, a.adam, theta, first, second);
    moment_out[1] = second;
  } else {
    nesterov_element(delta, a.nesterov, theta, first);
  }
  moment_out[0] = first;
  store_param<F>(a, i, theta, random);
}

}  // namespace cgad::fastpath
