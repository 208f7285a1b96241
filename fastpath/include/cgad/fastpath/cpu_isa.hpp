#pragma once
// Which instruction set the CPU backend's block loops run (cpu_blocks.cpp compiles each of them three times):
// AVX-512 (x86-64-v4), AVX2 (x86-64-v3) or baseline x86-64 ("generic"). The bits never depend on it — the
// vector code is checked against the one per-element rule (proptests/fastpath/fastpath_q8_vector_test.cpp) and the step
// fingerprint is the same under every ISA — so the choice is only about speed, and the benchmarks report it.
#include <cstdint>
#include <string_view>
#include <vector>

namespace cgad::fastpath {

enum class CpuIsa : std::uint8_t { generic, avx2, avx512 };

std::string_view to_string(CpuIsa isa);

// The ISAs this build and this CPU can both run, generic first. A build without the vector versions
// (CGAD_CPU_CLONES=OFF, or a compiler other than GCC on x86-64) has only generic.
std::vector<CpuIsa> supported_cpu_isas();

// The ISA a new CpuOptimizer runs: the best supported one, or the one the environment variable CGAD_CPU_ISA
// names (generic, avx2, avx512: to measure or test a slower one on a faster CPU). InputError for an unknown
// name or one this CPU or build cannot run.
CpuIsa selected_cpu_isa();

}  // namespace cgad::fastpath
