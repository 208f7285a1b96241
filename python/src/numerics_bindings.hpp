#pragma once
// The parts of the `cgad._numerics` module (numerics_module.cpp registers them): the reference, the differential
// replays and the noise study, the bound constants and the benchmarks' roofline -- everything that links MPFR, GMP
// and MPFI, kept out of `cgad._cgad` so that a trainer's `import cgad.torch` maps none of them (docs/design.md §7).
// They take the same option dicts as `cgad._cgad` (bindings.hpp).
#include "bindings.hpp"

#include <pybind11/pybind11.h>

namespace cgad::python {

void bind_numerics(pybind11::module_& m);      // numerics.cpp
void bind_differential(pybind11::module_& m);  // differential.cpp
void bind_bench(pybind11::module_& m);         // bench.cpp

}  // namespace cgad::python
