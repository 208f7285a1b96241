// `cgad._cgad`: the light module for trainers -- the fast path's optimizers and their configuration, the gate in
// double, the trap counter and the error type -- over core, io and the fast path only, so that `import cgad.torch`
// maps no MPFR, GMP or MPFI (docs/design.md §7). The numerics are `cgad._numerics` (numerics_module.cpp), loaded
// when used. Every refusal of bad input in the libraries (core::InputError) arrives in Python as cgad.InputError, a
// ValueError, with its one-line message; this module defines the class, and `cgad._numerics` raises the same one.
#include "arrays.hpp"
#include "bindings.hpp"

#include "cgad/core/errors.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_cgad, m) {
  m.doc() = "cgad's fast path (optimizers, configuration, gate in double, trap counter) for the cgad Python package";
  m.attr("__version__") = CGAD_VERSION;  // the CMake project's version
  py::register_exception<cgad::core::InputError>(m, "InputError", PyExc_ValueError);
  cgad::python::bind_arrays(m);
  cgad::python::bind_step_config(m);
  cgad::python::bind_schedule(m);
  cgad::python::bind_cpu_optimizer(m);
  cgad::python::bind_cuda_optimizer(m);
  cgad::python::bind_gate(m);
  cgad::python::bind_trap_counter(m);
  cgad::python::bind_state_keys(m);
}
