#pragma once
// The per-element update of every fast-path optimizer: the single source of truth that the CPU backend and
// the CUDA kernel both call (DESIGN.md §5). Everything here is fp32 arithmetic with one rounding per
// operation, in a fixed order; the build forbids contracting a*b + c into an fma on either side
// (-ffp-contract=off on the host, --fmad=false on the device), and division and sqrt are IEEE correctly
// rounded on both, so the two backends compute the same bits.
//
// Every step-wide constant (σ(τ), 1 − β, the bias corrections 1 − β^t) arrives precomputed on the host.
//
// Adam family (CGAD, PA-CGAD, Adam-Decay, Adam; DESIGN.md §3), in the reference's operation order:
//   g = σ·Δ;  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·(g·g)
//   θ = θ − η·( (m/b1) / (sqrt(v/b2) + ε) + λ·θ )          b1 = 1 − β1^t, b2 = 1 − β2^t
// Guard: when v = 0 the Adam term is taken as 0. In exact arithmetic v = 0 forces m = 0 (both are sums of
// the same gated gradients), so the guard only acts where rounding made v vanish under a nonzero m — a
// second moment that quantized or underflowed to 0 — where m/ε would be a step 1/ε times too large.
//
// Nesterov (DiLoCo outer recipe) and SDM (σ = 1/(1+τ)):
//   d = σ·Δ;  b = μ·b + d;  θ = θ − η·(d + μ·b)
#include "cgad/fastpath/portable.hpp"

namespace cgad::fastpath {

struct AdamCoefficients {
  float sigma;         // σ(τ) of the event (or of max(τ, a_f) for PA-CGAD)
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias1, bias2;  // 1 − β1^t, 1 − β2^t for the step count t after this step
  float lr, eps, weight_decay;
};

struct NesterovCoefficients {
  float sigma;  // 1 for Nesterov, 1/(1+τ) for SDM
  float momentum;
  float lr;
};

CGAD_HD inline void adam_element(float delta, const AdamCoefficients& c, float& theta, float& m, float& v) {
  const float g = c.sigma * delta;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * (g * g);
  const float m_hat = m / c.bias1;
  const float v_hat = v / c.bias2;
#if defined(__CUDA_ARCH__)
  const float root = __fsqrt_rn(v_hat);
#else
  const float root = __builtin_sqrtf(v_hat);
#endif
  // The quotient is computed whatever v is and then selected, rather than under a branch: a vectorizer
  // may not speculate a division it cannot prove harmless, and the selected bits are the same.
  const float quotient = m_hat / (root + c.eps);
  const float adam_term = v == 0.0f ? 0.0f : quotient;
  const float direction = adam_term + c.weight_decay * theta;
  theta = theta - c.lr * direction;
}

CGAD_HD inline void nesterov_element(float delta, const NesterovCoefficients& c, float& theta, float& b) {
  const float d = c.sigma * delta;
  b = c.momentum * b + d;
  theta = theta - c.lr * (d + c.momentum * b);
}

}  // namespace cgad::fastpath
