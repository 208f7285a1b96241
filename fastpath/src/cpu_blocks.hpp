#pragma once
// The CPU backend's block loops (cpu_blocks.cpp), one set per ISA (cpu_isa.hpp): the step of one chunk (or of a
// run of a tensor's chunks, for elementwise formats), the scan of a pseudo-gradient for values the step must refuse,
// and the pass that forms a pseudo-gradient and takes its largest magnitude.
#include "cgad/fastpath/detail/block_step.hpp"
#include "cgad/fastpath/cpu_isa.hpp"

#include <cstdint>

namespace cgad::fastpath {

// A block loop returns the chunk's elements whose state was invalid (update_element, block_step.hpp).
using BlockFunction = std::uint32_t (*)(const StepArgs&);

// The block loop for a step's runtime formats (its chunk_args), compiled for `isa`.
BlockFunction block_function_for(const StepArgs& a, CpuIsa isa);

// Whether any of values[0..count) would be refused: NaN or ±Inf, or — when `sigma` is not 0 — the overflow
// rule (refuses_event, element_update.hpp).
bool any_refused(const float* values, std::uint64_t count, float sigma, CpuIsa isa);

// out[j] = start[j] − local[j] for j < count (Δ = θ_start − θ formed, docs/design.md §5, "Δ checked where it is
// formed"); returns the largest (bits & 0x7FFFFFFF) it wrote: at least 0x7F800000 exactly when some Δ is NaN or ±Inf.
std::uint32_t form_delta(const float* start, const float* local, float* out, std::uint64_t count, CpuIsa isa);

}  // namespace cgad::fastpath
