#pragma once
// bitsandbytes' dynamic 8-bit maps, as created by `bitsandbytes.functional.create_dynamic_map(signed,
// max_exponent_bits=7, total_bits=8)` in releases 0.44.0 to 0.50.1 (the formula did not change in
// substance between them): the signed map for first moments (and Nesterov's momentum), the unsigned one
// for second moments. For exponent i = 0..6, n = 2^i + 1 (signed) or 2^(i+1) + 1 (unsigned) points of
// torch.linspace(0.1, 1, n) in float32; the n − 1 float32 means of consecutive points, times float32(10^(i−6));
// the signed map adds their negatives; then 0 and 1; sorted. Both maps hold an exact 0 (index 127 of the
// signed map, index 0 of the unsigned one), and 1 as their last code.
//
// torch.linspace's float32 points are not machine-independent: its CPU kernel computes
// start + step·idx (first half) and end − step·(n − 1 − idx) (second half) element by element, but its
// vectorized path computes base + j·step inside each vector, so the last bits depend on the vector width
// ATen picks (default, AVX2, AVX-512): the maps bitsandbytes builds differ by up to 2 ulps in 12 to 45 codes
// between those three. cgad uses the element-by-element rule, which is the definition the vector paths
// approximate and does not depend on the machine; fastpath/tools/bnb_dynamic_map.py prints the maps PyTorch
// builds, and the q8 map test records how far each of them is from ours. These built-in maps are the default; a q8
// optimizer can take its codes as data instead (StepConfig::q8_codes, config.hpp; cgad.torch's
// q8_maps="bitsandbytes" passes the installed create_dynamic_map's), built into maps by the same q8_map_of_codes
// (docs/design.md §5).
//
// The same codes serve both q8 semantics; what differs is the nearest-code rule, held in the map's thresholds
// (q8.hpp counts the thresholds below x either way):
//   cgad — the exact argmin: thresholds are the exact midpoints rounded down to floats, ties to the lower code.
//   bnb  — bitsandbytes' quantize_2D (csrc/kernels.cu, 0.44.0–0.50.1): a binary search from pivot 127 in steps
//          64, 32, …, 1 comparing x > code[pivot], which ends on an even pivot P with x in (code[P−1], code[P+1]],
//          then a comparison with the float midpoint (code[P±1] + code[P])·0.5f, a tie going to P. So between
//          codes k and k+1 the boundary is t_k = fl(fl(code[k] + code[k+1])·0.5), and a tie goes to whichever of
//          k, k+1 is even: x → k+1 iff t_k < x for even k, iff t_k ≤ x (⟺ pred(t_k) < x) for odd k. The
//          search's end cases agree: its initial bounds −1 (signed) / 0 and 1 send x ≤ code[0] to 0 and
//          x ≥ 1 to 255, and NaN fails every compare and ends at 0. The exhaustive test
//          (fastpath_q8_bnb_test) checks this table against the search itself on every float of [−1, 1].
//
// The zero-free map (VMap::zero_free, for second moments): Li, Chen & Zhu, "Memory Efficient Optimizers with 4-bit
// States" (NeurIPS 2023, arXiv 2309.01507), §4.1, name the zero-point problem (a v stored as 0 turns 1/sqrt(v)
// into 1/ε) and remove zero from the second moment's map; their DE-0 is the dynamic-exponent map without its zero,
// built in their code (lpmm, quant type "nonlinear-nozero") as the unsigned dynamic map with mapping[0] =
// mapping[1]. So is this one, at 8 bits: the unsigned map above with code[0] = code[1] ≈ 3.25·10^-7 (its smallest
// positive code) and codes 1..255 unchanged — 255 distinct values. Not 256 new ones: a rebuilt map would move every
// code and lose bitsandbytes' map everywhere but at 0, where the trap lives. What changes: a v below about
// 1.6·10^-7 of its block's absmax, stored as 0 by the dynamic map, is stored as 3.25·10^-7·absmax (an
// overestimate, so its step shrinks rather than grows); no v decodes to 0 unless its block's absmax is 0. Both
// nearest rules hold over the repeated code: the boundary between codes 0 and 1 is code[1] itself (exact midpoint
// and float midpoint alike), a tie going to 0 (lower and even), so x ≤ code[1] gives 0 and both decode to code[1];
// bitsandbytes' search ends there too (its initial lower bound 0 sends x ≤ code[0] to 0; fastpath_q8_bnb_test).
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/detail/q8.hpp"

#include <array>
#include <memory>
#include <span>

namespace cgad::fastpath {

static_assert(kQ8MapCodes == kQ8Codes);

enum class Q8MapKind { signed_map, unsigned_map, unsigned_zero_free };

// Built on first use (thread-safe static), immutable afterwards.
const Q8Map& dynamic_map(Q8MapKind kind, Q8Semantics semantics = Q8Semantics::cgad);

// The map of a q8 second moment under `map`.
Q8MapKind second_moment_map(VMap map);

// The map of `codes` (kQ8Codes floats, increasing) under `semantics`: the thresholds of its nearest-code rule, the
// bucket table and the line model where it holds; zero_free first sets code 0 to code 1 (DE-0 above). Every map,
// built-in or given (StepConfig::q8_codes), is built here. InputError where the codes are too close for the bucket
// table (q8.hpp).
Q8Map q8_map_of_codes(std::span<const float, kQ8Codes> codes, bool zero_free, Q8Semantics semantics);

// InputError, one line, unless `codes` are maps of the shape StepConfig::q8_codes takes (config.hpp).
void validate_q8_codes(const Q8Codes& codes);
// Whether `codes` are, bit for bit, the built-in signed and unsigned maps.
bool is_built_in(const Q8Codes& codes);
// Whether two configurations quantize with the same codes (their q8_codes, else the built-in ones), bit for bit.
bool same_q8_codes(const StepConfig& a, const StepConfig& b);

// The two maps a q8 optimizer of `config` uses, for its semantics and v map: moment 0 (m, Nesterov's momentum) and
// moment 1 (the second moment; unused by the Nesterov family). The built-in maps, or those of config.q8_codes,
// owned here (a copy shares them: the references stay valid as long as any copy lives).
class Q8Maps {
 public:
  explicit Q8Maps(const StepConfig& config);
  const Q8Map& moment(int k) const { return *moment_[k == 0 ? 0 : 1]; }

 private:
  std::array<const Q8Map*, 2> moment_{};
  std::shared_ptr<const std::array<Q8Map, 2>> owned_;
};

// torch.linspace(start, end, points) in float32, element-by-element rule (see above). Exposed for tests.
void torch_linspace_f32(float start, float end, int points, float* out);

}  // namespace cgad::fastpath
