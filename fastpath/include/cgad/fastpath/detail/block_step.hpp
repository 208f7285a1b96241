#pragma once
// One step over one chunk of at most 256 elements, in pieces both backends share: decode the stored
// parameter and moments to fp32, run the per-element update (element_update.hpp), round the parameter
// back, and requantize the moments — from the fp32 values the update produced (docs/design.md §5: θ is updated
// from the pre-quantization moments). A q8 moment's new absmax is the chunk's max |value|, which is exact
// and independent of the order of the reduction, so a CUB BlockReduce and a serial loop agree.
//
// Chunks (StepChunk) never cross a tensor or a fragment boundary: q8 blocks restart at each tensor, as
// bitsandbytes quantizes each tensor separately, and updating one PA-CGAD fragment never requantizes another
// fragment's state. A tensor under min_q8_size keeps fp32 moments in a q8 configuration; its chunks say so.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/detail/element_update.hpp"
#include "cgad/fastpath/formats.hpp"
#include "cgad/fastpath/portable.hpp"
#include "cgad/fastpath/detail/q8.hpp"
#include "cgad/fastpath/detail/random_bits.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::fastpath {

// Which update a step runs (the Adam family's or the Nesterov family's), an 8-bit enum like the formats, so the POD
// below crosses to the GPU unchanged.
enum class UpdateFamily : std::uint8_t { adam, nesterov };

// One moment buffer. For a whole step the pointers are the buffers' starts; chunk_args() moves them to a chunk.
struct MomentView {
  float* fp32 = nullptr;          // fp32 state: one per parameter
  bf16* bf16_values = nullptr;    // bf16 state: one per parameter
  std::uint8_t* codes = nullptr;  // q8 state: one per parameter (unused for tensors that keep fp32 state)
  float* absmax = nullptr;        // q8 state: one per q8 chunk
  float* fallback = nullptr;      // q8 configuration: the fp32 moments of tensors under min_q8_size
  const Q8Map* map = nullptr;
  int random_word = 0;
};

// A run of at most kQ8BlockSize elements inside one tensor and one fragment, the unit of a step.
struct StepChunk {
  std::uint64_t begin = 0;       // first element, an index into the whole parameter vector
  std::uint64_t slot = 0;        // q8: the index of its absmax; fp32 fallback: its first moment in `fallback`
  std::uint32_t count = 0;       // 1..kQ8BlockSize
  std::uint32_t fp32_state = 0;  // 1 in a q8 configuration when its tensor is under min_q8_size
};

// Everything one step needs, by value: pointers are to the fragment's slice.
struct StepArgs {
  UpdateFamily family = UpdateFamily::adam;
  ParamFormat params = ParamFormat::fp32;
  StateFormat state = StateFormat::fp32;
  bool stochastic = false;
  bool bnb = false;  // q8_semantics = bnb (element_update.hpp)
  int moments = 2;   // 2 for the Adam family (m, v), 1 for Nesterov (b)
  AdamCoefficients adam{};
  NesterovCoefficients nesterov{};
  std::uint64_t seed = 0;
  std::uint64_t step = 0;         // the optimizer's applied-step count after this step (keys the RNG)
  std::uint64_t first_index = 0;  // global index of the first element: the fragment's, then the chunk's
  std::uint64_t size = 0;         // elements in the fragment, then in the chunk
  float* params_fp32 = nullptr;   // the whole vector, then the chunk's first element
  bf16* params_bf16 = nullptr;
  const float* grad = nullptr;  // the fragment's slice, then the chunk's
  MomentView moment[2];
};

// `a` moved to chunk `c`, its moments' values found `value_at` elements and their absmax (or fp32 fallback)
// `value_at`/`slot_at` slots from a's moment pointers: c.begin and c.slot for buffers over the whole vector
// (chunk_args), the chunk's place in its tensor for one tensor's own state (table_stepper.cpp).
CGAD_HD inline StepArgs chunk_args_at(const StepArgs& a, const StepChunk& c, std::uint64_t value_at,
                                      std::uint64_t slot_at) {
  StepArgs r = a;
  r.grad = a.grad + (c.begin - a.first_index);
  r.first_index = c.begin;
  r.size = c.count;
  if (a.params_fp32 != nullptr) r.params_fp32 = a.params_fp32 + c.begin;
  if (a.params_bf16 != nullptr) r.params_bf16 = a.params_bf16 + c.begin;
  // A constant bound (moments is 1 or 2): the GPU then unrolls the loop, and r stays in registers.
  for (int k = 0; k < 2 && k < a.moments; ++k) {
    MomentView& m = r.moment[k];
    if (c.fp32_state != 0) {
      m.fp32 = a.moment[k].fallback + slot_at;
    } else if (a.state == StateFormat::fp32) {
      m.fp32 = a.moment[k].fp32 + value_at;
    } else if (a.state == StateFormat::bf16) {
      m.bf16_values = a.moment[k].bf16_values + value_at;
    } else {
      m.codes = a.moment[k].codes + value_at;
      m.absmax = a.moment[k].absmax + slot_at;
    }
  }
  if (c.fp32_state != 0) r.state = StateFormat::fp32;
  return r;
}

// `a` (a whole step: buffer starts, the fragment's grad slice and first index) moved to chunk `c`, whose
// elements are then 0..c.count−1 and whose q8 absmax is moment[k].absmax[0].
CGAD_HD inline StepArgs chunk_args(const StepArgs& a, const StepChunk& c) {
  return chunk_args_at(a, c, c.begin, c.slot);
}

// The largest |value| of a block, accumulated as max(acc, |x|) = (acc < |x|) ? |x| : acc on both backends.
CGAD_HD inline float absmax_step(float accumulated, float value) {
  const float magnitude = value < 0.0f ? -value : value;
  return accumulated < magnitude ? magnitude : accumulated;
}

CGAD_HD inline std::uint64_t block_count(std::uint64_t size) {
  return (size + kQ8BlockSize - 1) / kQ8BlockSize;
}

// Which formats a step runs is fixed at compile time by a policy F = FixedFormats<...>, so that the per-element
// branches fold away: both backends instantiate their step once per configuration through with_fixed_formats
// below (the CPU's block loops, the CUDA kernel) and run the very same code below. DecodedQ8: the CPU backend
// decodes a q8 block's codes beforehand (q8_vector.hpp, the same q8_dequantize values) into the moment view's fp32
// array, which the update then reads.
template <UpdateFamily Family, ParamFormat Params, StateFormat State, bool Stochastic, bool Bnb = false,
          bool DecodedQ8 = false>
struct FixedFormats {
  CGAD_HD static constexpr UpdateFamily family(const StepArgs&) { return Family; }
  CGAD_HD static constexpr ParamFormat params(const StepArgs&) { return Params; }
  CGAD_HD static constexpr StateFormat state(const StepArgs&) { return State; }
  CGAD_HD static constexpr bool stochastic(const StepArgs&) { return Stochastic; }
  CGAD_HD static constexpr bool bnb(const StepArgs&) { return Bnb; }
  CGAD_HD static constexpr bool decoded_q8(const StepArgs&) { return DecodedQ8; }
  static constexpr StateFormat kState = State;
  // The same configuration for a q8 configuration's chunks that keep fp32 state (tensors under min_q8_size), and
  // with q8 moments decoded beforehand (the CPU's block loop).
  using Fp32State = FixedFormats<Family, Params, StateFormat::fp32, Stochastic, Bnb, false>;
  using Decoded = FixedFormats<Family, Params, State, Stochastic, Bnb, State == StateFormat::q8>;
};

// A format policy passed as a value, so that a generic lambda can take it (the device code is C++17, without
// template lambdas): fn(FormatsTag<F>{}), then typename decltype(tag)::type inside.
template <class F>
struct FormatsTag {
  using type = F;
};

namespace detail {
template <UpdateFamily Family, ParamFormat Params, StateFormat State, class Fn>
decltype(auto) pick_rounding(const StepArgs& a, Fn&& fn) {
  if constexpr (Family == UpdateFamily::adam && State != StateFormat::bf16) {
    if (a.bnb) return fn(FormatsTag<FixedFormats<Family, Params, State, false, true>>{});
  }
  return a.stochastic ? fn(FormatsTag<FixedFormats<Family, Params, State, true>>{})
                      : fn(FormatsTag<FixedFormats<Family, Params, State, false>>{});
}
template <UpdateFamily Family, ParamFormat Params, class Fn>
decltype(auto) pick_state(const StepArgs& a, Fn&& fn) {
  switch (a.state) {
    case StateFormat::fp32:
      return pick_rounding<Family, Params, StateFormat::fp32>(a, fn);
    case StateFormat::bf16:
      return pick_rounding<Family, Params, StateFormat::bf16>(a, fn);
    case StateFormat::q8:
      break;
  }
  return pick_rounding<Family, Params, StateFormat::q8>(a, fn);
}
template <UpdateFamily Family, class Fn>
decltype(auto) pick_params(const StepArgs& a, Fn&& fn) {
  return a.params == ParamFormat::fp32 ? pick_state<Family, ParamFormat::fp32>(a, fn)
                                       : pick_state<Family, ParamFormat::bf16>(a, fn);
}
}  // namespace detail

// fn(FormatsTag<F>{}) for F = the FixedFormats of a's run-time configuration, one of the 28 that exist (bnb: Adam
// family, nearest rounding, no bf16 state, as config.cpp's validate() allows). Host code.
template <class Fn>
decltype(auto) with_fixed_formats(const StepArgs& a, Fn&& fn) {
  return a.family == UpdateFamily::adam ? detail::pick_params<UpdateFamily::adam>(a, fn)
                                        : detail::pick_params<UpdateFamily::nesterov>(a, fn);
}

// Word `which` of `random`, by selects: a run-time index into the array would keep the words in local memory on the
// GPU (a stack frame in ptxas' report), where each thread holds the words of several elements.
CGAD_HD inline std::uint32_t random_word(const RandomWords& random, int which) {
  return which == 0 ? random.word[0] : which == 1 ? random.word[1] : which == 2 ? random.word[2] : random.word[3];
}

template <class F>
CGAD_HD inline float load_param(const StepArgs& a, std::uint64_t i) {
  return F::params(a) == ParamFormat::fp32 ? a.params_fp32[i] : to_float(a.params_bf16[i]);
}

template <class F>
CGAD_HD inline void store_param(const StepArgs& a, std::uint64_t i, float value, const RandomWords& random) {
  if (F::params(a) == ParamFormat::fp32) {
    a.params_fp32[i] = value;
  } else {
    a.params_bf16[i] =
        F::stochastic(a) ? round_stochastic_bf16(value, random.word[kWordParam]) : round_nearest_even_bf16(value);
  }
}

// A value rounded to the parameter format and widened back (bnb rounds θ before its weight decay).
template <class F>
CGAD_HD inline float round_param(const StepArgs& a, float value) {
  return F::params(a) == ParamFormat::fp32 ? value : to_float(round_nearest_even_bf16(value));
}

// `block_absmax` is the block's stored absmax (used by q8 only).
template <class F>
CGAD_HD inline float load_moment(const StepArgs& a, const MomentView& s, std::uint64_t i, float block_absmax) {
  switch (F::state(a)) {
    case StateFormat::fp32:
      return s.fp32[i];
    case StateFormat::bf16:
      return to_float(s.bf16_values[i]);
    case StateFormat::q8:
      return F::decoded_q8(a) ? s.fp32[i] : q8_dequantize(s.codes[i], block_absmax, *s.map);
  }
  return 0.0f;
}

// fp32 and bf16 moments are stored element by element; q8 ones after the block's absmax is known.
template <class F>
CGAD_HD inline void store_moment_elementwise(const StepArgs& a, const MomentView& s, std::uint64_t i, float value,
                                             const RandomWords& random) {
  if (F::state(a) == StateFormat::fp32) {
    s.fp32[i] = value;
  } else if (F::state(a) == StateFormat::bf16) {
    s.bf16_values[i] = F::stochastic(a) ? round_stochastic_bf16(value, random_word(random, s.random_word))
                                        : round_nearest_even_bf16(value);
  }
}

// bnb's m code "sign fix" (kOptimizerStatic8bit2StateBlockwise): a code whose sign bit differs from the value's
// moves one step toward the value's side — so a tiny negative m (and −0) is stored as the smallest negative
// code, never as 0 — in uint8 arithmetic (a +0 m of an all-zero block, quantized from 0/0 = NaN to code 0 =
// −0.99…, wraps to code 255, which decodes to 0 there).
CGAD_HD inline std::uint8_t bnb_sign_fix(std::uint8_t code, float value, const Q8Map& map) {
  const bool differs = (float_to_bits(map.code[code]) >> 31) != (float_to_bits(value) >> 31);
  const std::uint8_t moved = static_cast<std::uint8_t>(value > 0.0f ? code + 1 : code - 1);
  return differs ? moved : code;
}

// `moment` is 0 for m (the signed map) and 1 for v.
template <class F>
CGAD_HD inline std::uint8_t quantize_moment(const StepArgs& a, const MomentView& s, int moment, float value,
                                            float absmax, const RandomWords& random) {
  if (F::bnb(a)) {
    // bnb divides with no guard (__fdividef, IEEE here): an all-zero block gives 0/0 = NaN, code 0.
    const std::uint8_t code = q8_nearest_fast(value / absmax, *s.map);
    return moment == 0 ? bnb_sign_fix(code, value, *s.map) : code;
  }
  const float x = q8_normalize(value, absmax);
  return F::stochastic(a) ? q8_stochastic(x, *s.map, random_word(random, s.random_word)) : q8_nearest_fast(x, *s.map);
}

template <class F>
CGAD_HD inline RandomWords random_for(const StepArgs& a, std::uint64_t i) {
  if (!F::stochastic(a)) return RandomWords{{0, 0, 0, 0}};
  return philox_words(a.seed, a.step, a.first_index + i);
}

// bnb's update of one element (element_update.hpp): its moment order for the q8 or the fp32 kernel, θ rounded
// to the parameter format, then its decoupled decay rounded again.
template <class F>
CGAD_HD inline void bnb_adam_element(const StepArgs& a, float delta, float& theta, float& m, float& v) {
  const float g = a.adam.sigma * delta;
  if (F::state(a) == StateFormat::q8) {
    bnb8_moments(g, a.adam, m, v);
  } else {
    bnb32_moments(g, a.adam, m, v);
  }
  theta = round_param<F>(a, bnb_moved_param(theta, m, v, a.adam));
  if (a.adam.weight_decay > 0.0f) theta = round_param<F>(a, theta * a.adam.decay);
}

// The first moment bnb's 8-bit kernel computes for a padding element of a partial block (its loads pad with
// g = 0 and m code 128): it takes part in the block's new absmax. The padding's v (code 0 = 0) is 0.
CGAD_HD inline float bnb_padding_first_moment(const AdamCoefficients& c, float old_absmax, const Q8Map& map) {
  float m = q8_dequantize(128, old_absmax, map), v = 0.0f;
  bnb8_moments(0.0f, c, m, v);
  return m;
}

// Whether x is neither NaN nor ±Inf, on its bits (a vectorizable integer test on the host, as the refusal scan's).
CGAD_HD inline bool finite_bits(float x) {
  return (float_to_bits(x) & 0x7F800000u) != 0x7F800000u;
}

// Whether x is a NaN, on its bits.
CGAD_HD inline bool nan_bits(float x) {
  return (float_to_bits(x) & 0x7FFFFFFFu) > 0x7F800000u;
}

// Updates element i (chunk-relative) with pseudo-gradient `delta` (the caller loaded grad[i]): reads θ and the
// decoded moments, writes θ, returns the new fp32 moments in `moment_out`. The CPU backend passes the chunk's
// buffers; the CUDA kernel's agent (agent/step_agent.hpp) a view of one thread's registers, loaded beforehand.
//
// The invalid-state guard (docs/design.md §3): the step is only reached when every σ·Δ passed the refusal scan,
// whose 4x headroom keeps g² and every product of a valid state finite, so a NaN or ±Inf new m, v (b), or a NaN θ
// from a non-NaN one, can only come from a state that was already invalid when the step read it — NaN/Inf moments,
// a negative v (whose square root is NaN), a NaN or Inf q8 absmax (a write past the state's version counter,
// docs/python.md "Edits of opt.state"). A θ that overflows to ±Inf from a valid state is not one: an lr past the
// range check (core's validate_range, which not every caller applies: simulate's divergence runs do not) moves θ
// by η·(a finite step), which overflows to ±Inf, never NaN; that is the run diverging, and is stepped as it is. Such an
// element keeps what it read — θ and its moments are written back unchanged, by a select, so valid elements' bits are
// those of the step without the guard — and returns 1 for the step to count it. (A kept value is exact in its format:
// rounding it back to bf16, nearest or stochastic, gives its own bits.) A θ already NaN when read is the caller's
// parameter, not state: it steps as it always did. A q8 block holding an element with invalid state keeps its codes and
// absmax (the callers: cpu_blocks.cpp, the agent), since its new absmax would be made from the invalid values.
template <class F>
CGAD_HD inline std::uint32_t update_element(const StepArgs& a, std::uint64_t i, float delta, const float* block_absmax,
                                            float* moment_out, const RandomWords& random) {
  const float theta_in = load_param<F>(a, i);
  const float first_in = load_moment<F>(a, a.moment[0], i, block_absmax[0]);
  float theta = theta_in, first = first_in;
  bool valid = true;
  if (F::family(a) == UpdateFamily::adam) {
    const float second_in = load_moment<F>(a, a.moment[1], i, block_absmax[1]);
    float second = second_in;
    if (F::bnb(a)) {
      bnb_adam_element<F>(a, delta, theta, first, second);
    } else {
      adam_element(delta, a.adam, theta, first, second);
    }
    valid = (!nan_bits(theta) | nan_bits(theta_in)) & finite_bits(first) & finite_bits(second);
    moment_out[1] = valid ? second : second_in;
  } else {
    nesterov_element(delta, a.nesterov, theta, first);
    valid = (!nan_bits(theta) | nan_bits(theta_in)) & finite_bits(first);
  }
  moment_out[0] = valid ? first : first_in;
  store_param<F>(a, i, valid ? theta : theta_in, random);
  return valid ? 0u : 1u;
}

}  // namespace cgad::fastpath
