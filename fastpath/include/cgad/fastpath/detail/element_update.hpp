#pragma once
// The per-element update of every fast-path optimizer: the single source of truth that the CPU backend and
// the CUDA kernel both call (docs/design.md §5). Everything here is fp32 arithmetic with one rounding per
// operation, in a fixed order; the build forbids contracting a*b + c into an fma on either side
// (-ffp-contract=off on the host, --fmad=false on the device), and division and sqrt are IEEE correctly
// rounded on both, so the two backends compute the same bits.
//
// Every step-wide constant (σ(τ), 1 − β, the bias corrections 1 − β^t) arrives precomputed on the host.
//
// Adam family (CGAD, PA-CGAD, Adam-Decay, Adam; docs/design.md §3), in the reference's operation order:
//   g = σ·Δ;  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·(g·g)
//   θ = θ − η·( (m/b1) / (sqrt(v/b2) + ε) + λ·θ )          b1 = 1 − β1^t, b2 = 1 − β2^t
// Guard: when v = 0 the Adam term is taken as 0. In exact arithmetic v = 0 forces m = 0 (both are sums of
// the same gated gradients), so the guard only acts where rounding made v vanish under a nonzero m — a
// second moment that quantized or underflowed to 0 — where m/ε would be a step 1/ε times too large.
//
// bitsandbytes' Adam (q8_semantics = bnb), transcribed from bitsandbytes 0.50.1 csrc/kernels.cu (unchanged in
// substance since 0.44.0), with g = σ·Δ where bnb has gnorm_scale·g:
//   kOptimizerStatic8bit2StateBlockwise<ADAM> (q8 tensors):
//     v = v·β2 + ((1−β2)·g)·g;  m = m·β1 + (1−β1)·g            (from the dequantized codes)
//     θ = T(θ + step_size·(m / (sqrt(v) + c2·ε)));  if λ > 0: θ = T(θ·(1 − η·λ))
//   kOptimizer32bit2State<ADAM> (fp32 state):
//     m = m·β1 + (1−β1)·g;  v = v·β2 + (1−β2)·(g·g);  θ as above with ε·c2 (the same product)
//   c1 = 1 − β1^t, c2 = sqrt(1 − β2^t), step_size = (−η·c2)/c1, T = rounding to the parameter format.
// No guard: where v is 0 under a nonzero m the step is η·m̂/ε-sized, as bnb takes it. Deviations, all forced
// or declared (proptests/bnb emulates bnb from its source; a review also ran bnb's own kernels, compiled for the
// CPU, against that emulation, bit for bit):
//   - bnb builds with nvcc --use_fast_math (its CMakeLists.txt): a*b + c may fuse into an fma, `/` and sqrt are
//     approximate, subnormals flush to zero, powf is __powf, and the 8-bit kernel divides with __fdividef.
//     cgad rounds every operation once (no fma), divides and takes square roots correctly rounded, keeps
//     subnormals, and evaluates β^t in double rounded once to float — the IEEE versions of those operations,
//     the same on the CPU and the GPU;
//   - g stays fp32 whatever the parameter format (bnb holds the gradient in the parameter's dtype);
//   - an event with a NaN/Inf or overflowing pseudo-gradient is skipped whole, where bnb's 8-bit kernel sets
//     that element's m and v to 0 (state lost) and leaves its θ, and its 32-bit kernel does not check at all;
//   - the maps are built with torch.linspace's element-by-element rule (q8_maps.hpp); the maps a bnb install
//     builds depend on its torch build's vector width and differ from these in 32–47 of 256 codes.
//
// Nesterov (DiLoCo outer recipe) and SDM (σ = 1/(1+τ)):
//   d = σ·Δ;  b = μ·b + d;  θ = θ − η·(d + μ·b)
#include "cgad/fastpath/portable.hpp"
#include "cgad/core/overflow_rule.hpp"

#include <cstdint>

namespace cgad::fastpath {

struct AdamCoefficients {
  float sigma;  // σ(τ) of the event (or of max(τ, a_f) for PA-CGAD)
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias1, bias2;  // 1 − β1^t, 1 − β2^t for the step count t after this step
  float lr, eps, weight_decay;
  // bnb semantics only: step_size = (−η·c2)/c1, eps_term = c2·ε, decay = 1 − η·λ (applied when λ > 0).
  float step_size, eps_term, decay;
};

struct NesterovCoefficients {
  float sigma;  // 1 for Nesterov, 1/(1+τ) for SDM
  float momentum;
  float lr;
};

// The overflow rule (core/overflow_rule.hpp): whether an element refuses its event, decided on the float
// product σ·Δ, the g the update would use (NaN and ±Inf Δ give NaN/Inf products and also count) — σ(τ) for the
// Adam family, 1 or 1/(1 + τ) for Nesterov and SDM. σ = 0 (a zero gate) never refuses.
inline constexpr std::uint32_t kRefusedGradientBits = (127u + core::kRefusedGradientExponent) << 23;
CGAD_HD inline bool refuses_event(float sigma, float delta) {
  return sigma != 0.0f && (float_to_bits(sigma * delta) & 0x7FFFFFFFu) >= kRefusedGradientBits;
}

CGAD_HD inline float ieee_sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return __builtin_sqrtf(x);
#endif
}

CGAD_HD inline void adam_element(float delta, const AdamCoefficients& c, float& theta, float& m, float& v) {
  const float g = c.sigma * delta;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * (g * g);
  const float m_hat = m / c.bias1;
  const float v_hat = v / c.bias2;
  const float root = ieee_sqrt(v_hat);
  // The quotient is computed whatever v is and then selected, rather than under a branch: a vectorizer
  // may not speculate a division it cannot prove harmless, and the selected bits are the same.
  const float quotient = m_hat / (root + c.eps);
  const float adam_term = v == 0.0f ? 0.0f : quotient;
  const float direction = adam_term + c.weight_decay * theta;
  theta = theta - c.lr * direction;
}

// bnb's moment updates: the 8-bit kernel's order, then the 32-bit kernel's.
CGAD_HD inline void bnb8_moments(float g, const AdamCoefficients& c, float& m, float& v) {
  v = v * c.beta2 + ((c.one_minus_beta2 * g) * g);
  m = m * c.beta1 + c.one_minus_beta1 * g;
}
CGAD_HD inline void bnb32_moments(float g, const AdamCoefficients& c, float& m, float& v) {
  m = m * c.beta1 + c.one_minus_beta1 * g;
  v = v * c.beta2 + c.one_minus_beta2 * (g * g);
}
// bnb's parameter update before its rounding to the parameter format (the decay follows that rounding).
CGAD_HD inline float bnb_moved_param(float theta, float m, float v, const AdamCoefficients& c) {
  return theta + c.step_size * (m / (ieee_sqrt(v) + c.eps_term));
}

CGAD_HD inline void nesterov_element(float delta, const NesterovCoefficients& c, float& theta, float& b) {
  const float d = c.sigma * delta;
  b = c.momentum * b + d;
  theta = theta - c.lr * (d + c.momentum * b);
}

}  // namespace cgad::fastpath
