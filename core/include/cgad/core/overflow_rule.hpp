#pragma once
// The overflow rule (docs/design.md §3), alone in a header with no dependencies so that the CUDA kernel's per-element
// code (fastpath/detail/element_update.hpp) shares the very constant the reference decides with.

namespace cgad::core {

// The overflow rule's threshold, 2^63: an event with |σ·Δ_i| ≥ 2^63 for some i is refused whole -- of the Adam
// family and of Nesterov and SDM (σ = 1 or 1/(1 + τ); nesterov.hpp), whose momentum and
// step carried such a Δ to −Inf on the first event. For the Adam family: at
// 2^64, (σΔ)² itself overflows float (v = +Inf; in q8 state every element of its block decodes as NaN). Below it,
// g² < 2^126 and everything the production update forms from g² stays finite with a factor 4 to spare: v is an
// average of g² terms (≤ max g²), v/(1 − β2^t) ≤ max g² in exact arithmetic, bf16 state rounds v up by at most
// 2^-8 of it, bnb's ((1−β2)·g)·g is smaller. Just under 2^64 two of them did overflow (bf16 v stored +Inf;
// v/(1 − β2^t) rounded to +Inf, zeroing the step): proptests/differential_overflow_test.
inline constexpr int kRefusedGradientExponent = 63;

}  // namespace cgad::core
