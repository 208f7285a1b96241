#pragma once
// The CUDA step's agent (docs/design.md §5: per-element functor → agent → dispatch → device API, CUB's layering): what
// one thread of the block that owns a chunk (block_step.hpp's StepChunk, ≤ 256 elements) does, written once for
// nvcc and g++ so that proptests/fastpath/fastpath_step_test.cpp runs this very code on the host, thread by thread,
// against the CPU backend.
//
// A thread owns TilePolicy::items elements of its chunk and moves every operand of theirs (Δ, θ, each moment's fp32
// or bf16 value or q8 code) between memory and registers in one of two arrangements:
//   - full tile, vectorized: the chunk is 256 elements and every operand's address is aligned for `items`
//     elements, so thread t owns elements items·t … items·t + items − 1 and moves each operand in one access
//     (16 bytes of fp32, 8 of bf16, 4 of q8 codes; a warp covers contiguous bytes). This is CUB agent_reduce's full
//     tile (an IsAligned check, then vector loads) and PyTorch's fused Adam (FusedAdamMathFunctor: every operand
//     through load_store, kILP = 4, when all are aligned);
//   - otherwise, guarded and striped: element j·threads + t for j < items, each access only where the element
//     exists — agent_reduce's partial tile and fused Adam's load_args/store_args. A warp's scalar accesses are
//     still contiguous. Chunks that start at a PA-CGAD fragment boundary ⌊f·n/P⌋ or inside a tensor table need
//     not be aligned, so they take this path even when full.
// Which elements a thread owns changes nothing computed: the update is elementwise, the random bits are keyed by
// the global index, and the q8 absmax is a max, exact in any order (block_step.hpp).
//
// Between load and store the thread runs block_step.hpp's per-element functions — the CPU backend's — over its
// registers: `tile` below is the chunk's StepArgs with each operand pointer moved to the thread's register array, so
// update_element(tile, j, …) reads θ and the decoded moments of item j from registers and leaves the new θ and
// elementwise moments there. After inlining and unrolling every index is a constant, so the arrays stay in
// registers (ptxas reports no stack frame for the kernel).
#include "cgad/fastpath/detail/block_step.hpp"

#include <cstdint>

// Every loop over a thread's items or a chunk's moments is unrolled on the device, so that each index into the
// register arrays is a constant (a run-time index would put the arrays in local memory). GCC knows no such pragma.
#if defined(__CUDA_ARCH__)
#define CGAD_AGENT_UNROLL _Pragma("unroll")
#else
#define CGAD_AGENT_UNROLL
#endif

namespace cgad::fastpath::agent {

// One chunk per block: threads × items = kQ8BlockSize. 64 × 4 was never tuned on a GPU; it is one place to change.
struct TilePolicy {
  static constexpr int threads = 64;
  static constexpr int items = 4;
};
static_assert(TilePolicy::threads * TilePolicy::items == static_cast<int>(kQ8BlockSize));

// `items` operands of one kind, moved in one access where aligned.
template <class T, int N>
struct alignas(sizeof(T) * N) Vector {
  T value[N];
};

// Loads and stores of a Vector: one instruction on the device (ld/st.global.v4 for fp32, v4 of 16 and 8 bits for
// bf16 and codes, as CUB's vectorized loads reinterpret the input); element by element on the host, where the
// reinterpretation would not be an access through the element type.
template <class T, int N>
CGAD_HD inline Vector<T, N> load_vector(const T* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Vector<T, N>*>(p);
#else
  Vector<T, N> v;
  for (int j = 0; j < N; ++j) v.value[j] = p[j];
  return v;
#endif
}
template <class T, int N>
CGAD_HD inline void store_vector(T* p, const Vector<T, N>& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Vector<T, N>*>(p) = v;
#else
  for (int j = 0; j < N; ++j) p[j] = v.value[j];
#endif
}

template <class T, int N>
CGAD_HD inline bool aligned_for(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % sizeof(Vector<T, N>) == 0;
}

// Whether chunk `a` (chunk_args() of a step) is a full tile whose every operand can be moved vectorized. The same
// for every thread of the block, so the branch on it does not diverge.
template <class F, class P = TilePolicy>
CGAD_HD inline bool vectorized_tile(const StepArgs& a) {
  constexpr int N = P::items;
  if (a.size != static_cast<std::uint64_t>(P::threads * N)) return false;
  bool aligned = aligned_for<float, N>(a.grad);
  aligned = aligned && (F::params(a) == ParamFormat::fp32 ? aligned_for<float, N>(a.params_fp32)
                                                          : aligned_for<bf16, N>(a.params_bf16));
  CGAD_AGENT_UNROLL
  for (int k = 0; k < 2 && k < a.moments; ++k) {
    const MomentView& m = a.moment[k];
    switch (F::state(a)) {
      case StateFormat::fp32:
        aligned = aligned && aligned_for<float, N>(m.fp32);
        break;
      case StateFormat::bf16:
        aligned = aligned && aligned_for<bf16, N>(m.bf16_values);
        break;
      case StateFormat::q8:
        aligned = aligned && aligned_for<std::uint8_t, N>(m.codes);
        break;
    }
  }
  return aligned;
}

// fn(FormatsTag<G>{}) with the formats G chunk c runs in a configuration F: F, or F::Fp32State for a q8
// configuration's chunk that keeps fp32 state (a tensor under min_q8_size). Uniform across the block.
template <class F, class Fn>
CGAD_HD inline void with_chunk_formats(const StepChunk& c, Fn&& fn) {
  if constexpr (F::kState == StateFormat::q8) {
    if (c.fp32_state != 0) {
      fn(FormatsTag<typename F::Fp32State>{});
      return;
    }
  }
  fn(FormatsTag<F>{});
}

// A chunk's stored absmax per moment, read before any thread of the block replaces it (0 outside q8).
template <class F>
CGAD_HD inline void old_absmax(const StepArgs& a, float (&out)[2]) {
  out[0] = out[1] = 0.0f;
  if (F::state(a) != StateFormat::q8) return;
  CGAD_AGENT_UNROLL
  for (int k = 0; k < 2 && k < a.moments; ++k) out[k] = a.moment[k].absmax[0];
}

// The block's new absmax of moment k from the max over its elements (a BlockReduce on the device): bnb's partial
// block adds its padding's first moment (block_step.hpp).
template <class F>
CGAD_HD inline float finish_absmax(const StepArgs& a, int k, float reduced, const float (&old)[2]) {
  if (F::bnb(a) && k == 0 && a.size < kQ8BlockSize) {
    return absmax_step(reduced, bnb_padding_first_moment(a.adam, old[0], *a.moment[0].map));
  }
  return reduced;
}

// One thread's elements of one chunk, in registers from load to store.
template <class F, class P = TilePolicy>
class TileThread {
 public:
  static constexpr int items = P::items;

  // Loads the thread's operands, runs the per-element update on each of its elements and stores θ and the fp32
  // and bf16 moments; q8 moments stay in registers (fresh) for the block's absmax and store_codes().
  CGAD_HD void update(const StepArgs& a, int thread, bool vectorized, const float (&old)[2]) {
    thread_ = thread;
    vectorized_ = vectorized;
    valid_ = static_cast<int>(a.size);
    const bool fp32_params = F::params(a) == ParamFormat::fp32;
    move_in(a.grad, delta_);
    if (fp32_params) {
      move_in(a.params_fp32, theta_fp32_);
    } else {
      move_in(a.params_bf16, theta_bf16_);
    }
    CGAD_AGENT_UNROLL
    for (int k = 0; k < 2 && k < a.moments; ++k) {
      switch (F::state(a)) {
        case StateFormat::fp32:
          move_in(a.moment[k].fp32, fp32_[k]);
          break;
        case StateFormat::bf16:
          move_in(a.moment[k].bf16_values, bf16_[k]);
          break;
        case StateFormat::q8:
          move_in(a.moment[k].codes, codes_[k]);
          break;
      }
    }
    const StepArgs tile = registers_of(a);
    CGAD_AGENT_UNROLL
    for (int j = 0; j < items; ++j) {
      if (!owns(j)) continue;
      random_[j] = random_for<F>(a, static_cast<std::uint64_t>(element(j)));
      float out[2] = {0.0f, 0.0f};
      invalid_ += update_element<F>(tile, static_cast<std::uint64_t>(j), delta_[j], old, out, random_[j]);
      CGAD_AGENT_UNROLL
      for (int k = 0; k < 2 && k < a.moments; ++k) {
        fresh_[k][j] = out[k];
        store_moment_elementwise<F>(tile, tile.moment[k], static_cast<std::uint64_t>(j), out[k], random_[j]);
      }
    }
    if (fp32_params) {
      move_out(theta_fp32_, a.params_fp32);
    } else {
      move_out(theta_bf16_, a.params_bf16);
    }
    CGAD_AGENT_UNROLL
    for (int k = 0; k < 2 && k < a.moments; ++k) {
      if (F::state(a) == StateFormat::fp32) move_out(fp32_[k], a.moment[k].fp32);
      if (F::state(a) == StateFormat::bf16) move_out(bf16_[k], a.moment[k].bf16_values);
    }
  }

  // The thread's elements whose state was invalid (update_element): they kept what they read. A q8 block where any
  // thread has one keeps its codes and absmax (the caller skips the absmax and store_codes), as the CPU's block does.
  CGAD_HD std::uint32_t invalid() const { return invalid_; }

  // The largest |new moment k| over the thread's elements (absmax_step from 0, as the CPU's block fold).
  CGAD_HD float partial_absmax(int k) const {
    float partial = 0.0f;
    CGAD_AGENT_UNROLL
    for (int j = 0; j < items; ++j) {
      if (owns(j)) partial = absmax_step(partial, fresh_[k][j]);
    }
    return partial;
  }

  // q8: the codes of moment k against the block's new absmax, stored.
  CGAD_HD void store_codes(const StepArgs& a, int k, float absmax) {
    const StepArgs tile = registers_of(a);
    CGAD_AGENT_UNROLL
    for (int j = 0; j < items; ++j) {
      if (owns(j)) codes_[k][j] = quantize_moment<F>(tile, tile.moment[k], k, fresh_[k][j], absmax, random_[j]);
    }
    move_out(codes_[k], a.moment[k].codes);
  }

  // Chunk-relative index of the thread's item j, in the arrangement of this chunk.
  CGAD_HD int element(int j) const { return vectorized_ ? thread_ * items + j : j * P::threads + thread_; }
  CGAD_HD bool owns(int j) const { return element(j) < valid_; }

 private:
  // `a` with every operand pointer on this thread's registers: item j of the tile is element(j) of the chunk.
  CGAD_HD StepArgs registers_of(const StepArgs& a) {
    StepArgs tile = a;
    tile.params_fp32 = theta_fp32_;
    tile.params_bf16 = theta_bf16_;
    CGAD_AGENT_UNROLL
    for (int k = 0; k < 2; ++k) {
      tile.moment[k].fp32 = fp32_[k];
      tile.moment[k].bf16_values = bf16_[k];
      tile.moment[k].codes = codes_[k];
    }
    return tile;
  }

  template <class T>
  CGAD_HD void move_in(const T* memory, T (&registers)[items]) const {
    if (vectorized_) {
      const Vector<T, items> v = load_vector<T, items>(memory + thread_ * items);
      CGAD_AGENT_UNROLL
      for (int j = 0; j < items; ++j) registers[j] = v.value[j];
      return;
    }
    CGAD_AGENT_UNROLL
    for (int j = 0; j < items; ++j) {
      if (owns(j)) registers[j] = memory[element(j)];
    }
  }
  template <class T>
  CGAD_HD void move_out(const T (&registers)[items], T* memory) const {
    if (vectorized_) {
      Vector<T, items> v;
      CGAD_AGENT_UNROLL
      for (int j = 0; j < items; ++j) v.value[j] = registers[j];
      store_vector<T, items>(memory + thread_ * items, v);
      return;
    }
    CGAD_AGENT_UNROLL
    for (int j = 0; j < items; ++j) {
      if (owns(j)) memory[element(j)] = registers[j];
    }
  }

  int thread_ = 0;
  bool vectorized_ = false;
  int valid_ = 0;
  std::uint32_t invalid_ = 0;
  float delta_[items] = {};
  float theta_fp32_[items] = {};
  bf16 theta_bf16_[items] = {};
  float fp32_[2][items] = {};
  bf16 bf16_[2][items] = {};
  std::uint8_t codes_[2][items] = {};
  float fresh_[2][items] = {};
  RandomWords random_[items] = {};
};

}  // namespace cgad::fastpath::agent
