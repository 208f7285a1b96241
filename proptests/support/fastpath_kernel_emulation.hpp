#pragma once
// The CUDA kernel (fastpath/src/cuda_kernels.cu) is its agent (agent/step_agent.hpp) run by one block per chunk:
// each thread loads its elements' operands — vectorized for a full, aligned chunk, guarded and striped otherwise —
// runs block_step.hpp in the configuration's FixedFormats (chosen by with_fixed_formats and, for a q8 configuration's
// fp32-fallback chunk, with_chunk_formats, as the kernel chooses them), stores θ and the elementwise moments; for
// q8 the block reduces each moment's absmax (thread 0 finishes and stores it) and every thread stores its codes.
// This host emulation runs the agent's own code for every thread of every block in the kernel's order (the reduction
// folded in reverse thread order: a max is exact in any order), so where no GPU is available to compare the real
// kernel, its logic — both arrangements, the alignment decision, the tail, the q8 absmax — is checked against the CPU
// backend bit for bit (fastpath_step_test.cpp for the contiguous step, fastpath_tensor_table_test.cpp for the table
// step's launches, chunk → tensor map and caller-owned per-tensor state).
#include "cgad/fastpath/detail/step_agent.hpp"
#include "cgad/fastpath/detail/host_state.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cgad::fastpath::testing {

struct KernelPaths {
  std::size_t vectorized = 0;    // full chunks, every operand aligned
  std::size_t guarded_full = 0;  // full chunks with a misaligned operand (fragment or tensor boundaries)
  std::size_t tail = 0;          // partial chunks
};

// Every state array's bytes, moment by moment.
inline std::vector<unsigned char> state_arrays(const HostState& s) {
  std::vector<unsigned char> out;
  const auto append = [&out](const void* p, std::size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(p);
    out.insert(out.end(), b, b + bytes);
  };
  for (int k = 0; k < 2; ++k) {
    append(s.fp32[k].data(), s.fp32[k].size() * 4);
    append(s.bf16_values[k].data(), s.bf16_values[k].size() * 2);
    append(s.codes[k].data(), s.codes[k].size());
    append(s.absmax[k].data(), s.absmax[k].size() * 4);
  }
  return out;
}

// Whether the agent must vectorize `chunk` when every buffer starts 16-byte aligned (operator new): it is full, and
// its state element's position in its buffer (`state_at`), its Δ and θ positions in theirs (`operands_at`) and
// (fp32 fallback) its slot's (`slot_at`) are multiples of 4.
inline bool vectorizable(const StepChunk& chunk, std::size_t state_at, std::size_t operands_at, std::size_t slot_at) {
  constexpr std::size_t items = agent::TilePolicy::items;
  return chunk.count == kQ8BlockSize && state_at % items == 0 && operands_at % items == 0 &&
         (chunk.fp32_state == 0 || slot_at % items == 0);
}
// The same for a state in buffers over the whole vector (the chunk's element and slot index them).
inline bool vectorizable(const StepChunk& chunk, std::size_t operands_at) {
  return vectorizable(chunk, chunk.begin, operands_at, chunk.slot);
}

// One block of the kernel (cuda_kernels.cu's step_chunk) on chunk `a`, every thread in turn, formats F; the agent's
// alignment decision must be `expected_vectorized`. Returns the block's elements with invalid state (the count the
// kernel adds to its step record).
template <class F>
std::uint32_t emulate_block(StepArgs& a, const StepChunk& chunk, bool expected_vectorized, KernelPaths& paths,
                            const std::string& what) {
  using agent::TilePolicy;
  float old[2];
  agent::old_absmax<F>(a, old);
  const bool vectorized = agent::vectorized_tile<F>(a);
  EXPECT_EQ(vectorized, expected_vectorized) << what << " chunk at " << chunk.begin;
  ++(vectorized ? paths.vectorized : a.size == kQ8BlockSize ? paths.guarded_full : paths.tail);
  agent::TileThread<F> threads[TilePolicy::threads];
  std::uint32_t invalid = 0;
  for (int t = 0; t < TilePolicy::threads; ++t) {
    threads[t].update(a, t, vectorized, old);
    invalid += threads[t].invalid();
  }
  if constexpr (F::kState == StateFormat::q8) {
    if (invalid != 0) return invalid;  // the block keeps its codes and absmax (__syncthreads_or in the kernel)
    for (int k = 0; k < a.moments; ++k) {
      float reduced = 0.0f;
      for (int t = TilePolicy::threads; t-- > 0;) reduced = absmax_step(reduced, threads[t].partial_absmax(k));
      const float absmax = agent::finish_absmax<F>(a, k, reduced, old);
      a.moment[k].absmax[0] = absmax;
      for (auto& thread : threads) thread.store_codes(a, k, absmax);
    }
  }
  return invalid;
}

// Chunk `chunk` of step `step`, at operands `a` (chunk_args or table_chunk_args), in the formats the kernel picks.
inline std::uint32_t emulate_kernel_block(const StepArgs& step, const StepChunk& chunk, StepArgs a,
                                          bool expected_vectorized, KernelPaths& paths, const std::string& what) {
  std::uint32_t invalid = 0;
  with_fixed_formats(step, [&](auto formats) {
    agent::with_chunk_formats<typename decltype(formats)::type>(chunk, [&](auto chunk_formats) {
      invalid = emulate_block<typename decltype(chunk_formats)::type>(a, chunk, expected_vectorized, paths, what);
    });
  });
  return invalid;
}

}  // namespace cgad::fastpath::testing
