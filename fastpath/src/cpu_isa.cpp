#include "cgad/fastpath/cpu_isa.hpp"

#include "cgad/core/errors.hpp"

#include <cstdlib>
#include <string>

namespace cgad::fastpath {

std::string_view to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::generic:
      return "generic";
    case CpuIsa::avx2:
      return "avx2";
    case CpuIsa::avx512:
      return "avx512";
  }
  return "?";
}

std::vector<CpuIsa> supported_cpu_isas() {
  std::vector<CpuIsa> isas{CpuIsa::generic};
#if defined(CGAD_CPU_VECTOR_ISAS)
  // GCC's names for the x86-64 micro-architecture levels: exactly the features the -march levels of
  // cpu_blocks.cpp's target attributes enable.
  if (__builtin_cpu_supports("x86-64-v3")) isas.push_back(CpuIsa::avx2);
  if (__builtin_cpu_supports("x86-64-v4")) isas.push_back(CpuIsa::avx512);
#endif
  return isas;
}

CpuIsa selected_cpu_isa() {
  const std::vector<CpuIsa> isas = supported_cpu_isas();
  const char* wanted = std::getenv("CGAD_CPU_ISA");
  if (wanted == nullptr || *wanted == '\0') return isas.back();
  std::string names;
  for (CpuIsa isa : isas) {
    if (to_string(isa) == wanted) return isa;
    names += (names.empty() ? "" : ", ") + std::string(to_string(isa));
  }
  throw core::InputError("CGAD_CPU_ISA=" + std::string(wanted) + " is not an ISA this CPU and build can run (" + names +
                         ")");
}

}  // namespace cgad::fastpath
