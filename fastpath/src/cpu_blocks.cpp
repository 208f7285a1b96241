#include "cpu_blocks.hpp"

#include "cgad/fastpath/detail/q8_vector.hpp"

#include <cstring>

namespace cgad::fastpath {
namespace {

// Each loop below is written once, as a template body, and compiled three times by the wrappers at the end:
// for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and baseline x86-64, each wrapper `flatten`ed so that the whole body
// (and everything it calls from the headers) is inlined into it and compiled for its ISA — no call from one
// ISA's code can reach another's out-of-line copy. CpuOptimizer picks the ISA (selected_cpu_isa). The bits
// cannot depend on it: -ffp-contract=off holds for vector code too, vector division and square root are
// correctly rounded like the scalar ones, and the q8 vector code is checked against the per-element rule.
// Without CGAD_CPU_VECTOR_ISAS (CMake CGAD_CPU_CLONES=OFF, or not GCC on x86-64) only the baseline exists.
#if defined(CGAD_CPU_VECTOR_ISAS)
#define CGAD_ISA_AVX512 __attribute__((target("arch=x86-64-v4"), flatten))
#define CGAD_ISA_AVX2 __attribute__((target("arch=x86-64-v3"), flatten))
#endif
#define CGAD_ISA_GENERIC __attribute__((flatten))

// absmax_step folded over values[0..count) from 0 (block_step.hpp), as an integer max that vectorizes: the
// fold is the largest non-NaN |value| (NaN never wins a compare; −0 never beats the initial +0), and for
// non-NaN magnitudes the float order is the order of their bit patterns as unsigned integers (sign bit
// clear), so the max of the bit patterns, with NaN's patterns replaced by +0's, is the same float.
inline std::uint32_t absmax_bits(float value) {
  const std::uint32_t magnitude = float_to_bits(value) & 0x7FFFFFFFu;
  // A mask rather than a select: GCC would fold a select into the max and then not vectorize the fold.
  const std::uint32_t keep = 0u - static_cast<std::uint32_t>(magnitude <= 0x7F800000u);
  return magnitude & keep;
}

inline float block_absmax(const float* values, std::uint64_t count) {
  std::uint32_t largest = 0;
  for (std::uint64_t j = 0; j < count; ++j) {
    const std::uint32_t bits = absmax_bits(values[j]);
    largest = largest < bits ? bits : largest;
  }
  return bits_to_float(largest);
}

// A q8 moment's codes for one chunk (quantize_moment, block_step.hpp). Nearest rounding runs the block encoder
// (q8_vector.hpp) on the normalized values; stochastic rounding the per-element rule. The codes go to a local
// array first: a byte store through `out` may alias anything, which would stop the vectorizer.
template <class F, CpuIsa Isa>
inline void quantize_block(const StepArgs& a, int moment, const float* fresh, float absmax, std::uint64_t count,
                           const RandomWords* random, std::uint8_t* out) {
  constexpr bool stochastic = F::stochastic(StepArgs{});
  const MomentView& view = a.moment[moment];
  std::uint8_t codes[kQ8BlockSize];
  if constexpr (stochastic) {
    for (std::uint64_t j = 0; j < count; ++j) {
      codes[j] = quantize_moment<F>(a, view, moment, fresh[j], absmax, random[j]);
    }
  } else {
    float normalized[kQ8BlockSize];
    for (std::uint64_t j = 0; j < count; ++j) {
      // bnb divides with no guard (quantize_moment): an all-zero block gives 0/0 = NaN, code 0.
      normalized[j] = F::bnb(a) ? fresh[j] / absmax : q8_normalize(fresh[j], absmax);
    }
    q8_encode_nearest(normalized, count, *view.map, codes, Isa);
    if (F::bnb(a) && moment == 0) {
      if (view.map->has_model != 0) {
        bnb_sign_fix_block(codes, fresh, count, *view.map);
      } else {
        for (std::uint64_t j = 0; j < count; ++j) codes[j] = bnb_sign_fix(codes[j], fresh[j], *view.map);
      }
    }
  }
  std::memcpy(out, codes, count);
}

// One chunk of the step (block_step.hpp; `chunk` is chunk_args() of the step), in passes that are each a simple
// loop: decode each q8 moment's codes, update every element (the per-element update, the same calls the CUDA
// kernel makes), then each q8 moment's new absmax and its codes. F fixes the formats at compile time (one
// instantiation per configuration). Every element reads and writes only its own index of each buffer, so the
// update loop has no loop-carried dependence (ivdep says so to the vectorizer, which cannot prove that the
// caller's buffers do not overlap). Returns the chunk's elements with invalid state (update_element), which kept
// what they read; a q8 chunk holding one keeps its codes and absmax too (block_step.hpp).
template <class F, CpuIsa Isa>
inline std::uint32_t step_block(const StepArgs& chunk) {
  // A local copy: no store of the step can reach it, so its pointers and coefficients stay in registers and
  // its fields may be read unconditionally.
  StepArgs a = chunk;
  const std::uint64_t count = a.size;
  constexpr bool q8 = F::state(StepArgs{}) == StateFormat::q8;
  constexpr bool stochastic = F::stochastic(StepArgs{});
  constexpr int moments = F::family(StepArgs{}) == UpdateFamily::adam ? 2 : 1;
  static_assert(!q8 || F::decoded_q8(StepArgs{}), "the CPU block loop decodes q8 moments beforehand");
  float old_absmax[2] = {0.0f, 0.0f};
  // q8: the decoded moments, which the update then overwrites with the fp32 values the codes are made from.
  float moment[2][kQ8BlockSize];
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) {
      old_absmax[k] = a.moment[k].absmax[0];
      q8_decode(a.moment[k].codes, count, old_absmax[k], *a.moment[k].map, moment[k], Isa);
    }
  }
  StepArgs decoded = a;
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) decoded.moment[k].fp32 = moment[k];
  }
  RandomWords random[stochastic ? kQ8BlockSize : 1] = {};  // nearest rounding reads no random bits
  std::uint32_t invalid = 0;
#pragma GCC ivdep
  for (std::uint64_t i = 0; i < count; ++i) {
    const RandomWords& bits = random[stochastic ? i : 0];
    if constexpr (stochastic) random[i] = random_for<F>(a, i);
    float out[2];
    invalid += update_element<F>(decoded, i, a.grad[i], old_absmax, out, bits);
    for (int k = 0; k < moments; ++k) {
      if constexpr (q8) {
        moment[k][i] = out[k];
      } else {
        store_moment_elementwise<F>(a, a.moment[k], i, out[k], bits);
      }
    }
  }
  if constexpr (q8) {
    if (invalid != 0) return invalid;
    for (int k = 0; k < moments; ++k) {
      float absmax = block_absmax(moment[k], count);
      // bnb's partial block: its padding's m takes part in the new absmax (block_step.hpp).
      if (F::bnb(a) && k == 0 && count < kQ8BlockSize) {
        absmax = absmax_step(absmax, bnb_padding_first_moment(a.adam, old_absmax[0], *a.moment[0].map));
      }
      a.moment[k].absmax[0] = absmax;
      quantize_block<F, Isa>(a, k, moment[k], absmax, count, random, a.moment[k].codes);
    }
  }
  return invalid;
}

// A branch-free OR over the chunk, so that the scan vectorizes; the caller then looks for the first such index.
inline bool any_refused_body(const float* values, std::uint64_t count, float sigma) {
  std::uint32_t found = 0;
  for (std::uint64_t j = 0; j < count; ++j) {
    const std::uint32_t nonfinite = (float_to_bits(values[j]) & 0x7F800000u) == 0x7F800000u;
    found |= nonfinite | static_cast<std::uint32_t>(refuses_event(sigma, values[j]));
  }
  return found != 0;
}

// out = start − local element by element (IEEE binary32 subtraction, as torch's), and the largest magnitude's bits
// of what it wrote, as an integer max that vectorizes: a NaN or ±Inf has bits ≥ 0x7F800000, above every finite one.
inline std::uint32_t form_delta_body(const float* start, const float* local, float* out, std::uint64_t count) {
  std::uint32_t largest = 0;
#pragma GCC ivdep
  for (std::uint64_t j = 0; j < count; ++j) {
    const float delta = start[j] - local[j];
    out[j] = delta;
    const std::uint32_t bits = float_to_bits(delta) & 0x7FFFFFFFu;
    largest = largest < bits ? bits : largest;
  }
  return largest;
}

// The ISA wrappers (see the top of this file).
#if defined(CGAD_CPU_VECTOR_ISAS)
template <class F>
CGAD_ISA_AVX512 std::uint32_t step_block_avx512(const StepArgs& a) {
  return step_block<F, CpuIsa::avx512>(a);
}
template <class F>
CGAD_ISA_AVX2 std::uint32_t step_block_avx2(const StepArgs& a) {
  return step_block<F, CpuIsa::avx2>(a);
}
CGAD_ISA_AVX512 bool any_refused_avx512(const float* v, std::uint64_t n, float s) {
  return any_refused_body(v, n, s);
}
CGAD_ISA_AVX2 bool any_refused_avx2(const float* v, std::uint64_t n, float s) {
  return any_refused_body(v, n, s);
}
CGAD_ISA_AVX512 std::uint32_t form_delta_avx512(const float* a, const float* b, float* out, std::uint64_t n) {
  return form_delta_body(a, b, out, n);
}
CGAD_ISA_AVX2 std::uint32_t form_delta_avx2(const float* a, const float* b, float* out, std::uint64_t n) {
  return form_delta_body(a, b, out, n);
}
#endif
template <class F>
CGAD_ISA_GENERIC std::uint32_t step_block_generic(const StepArgs& a) {
  return step_block<F, CpuIsa::generic>(a);
}
CGAD_ISA_GENERIC bool any_refused_generic(const float* v, std::uint64_t n, float s) {
  return any_refused_body(v, n, s);
}
CGAD_ISA_GENERIC std::uint32_t form_delta_generic(const float* a, const float* b, float* out, std::uint64_t n) {
  return form_delta_body(a, b, out, n);
}

template <class F>
BlockFunction for_isa(CpuIsa isa) {
#if defined(CGAD_CPU_VECTOR_ISAS)
  if (isa == CpuIsa::avx512) return &step_block_avx512<F>;
  if (isa == CpuIsa::avx2) return &step_block_avx2<F>;
#endif
  (void)isa;
  return &step_block_generic<F>;
}

}  // namespace

BlockFunction block_function_for(const StepArgs& a, CpuIsa isa) {
  return with_fixed_formats(a, [isa](auto formats) { return for_isa<typename decltype(formats)::type::Decoded>(isa); });
}

bool any_refused(const float* values, std::uint64_t count, float sigma, CpuIsa isa) {
#if defined(CGAD_CPU_VECTOR_ISAS)
  if (isa == CpuIsa::avx512) return any_refused_avx512(values, count, sigma);
  if (isa == CpuIsa::avx2) return any_refused_avx2(values, count, sigma);
#endif
  (void)isa;
  return any_refused_generic(values, count, sigma);
}

std::uint32_t form_delta(const float* start, const float* local, float* out, std::uint64_t count, CpuIsa isa) {
#if defined(CGAD_CPU_VECTOR_ISAS)
  if (isa == CpuIsa::avx512) return form_delta_avx512(start, local, out, count);
  if (isa == CpuIsa::avx2) return form_delta_avx2(start, local, out, count);
#endif
  (void)isa;
  return form_delta_generic(start, local, out, count);
}

}  // namespace cgad::fastpath
