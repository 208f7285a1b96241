// `cgad._cgad`: the C++ libraries for the `cgad` Python package (python/cgad). Every refusal of bad input in
// the libraries (core::InputError) arrives in Python as cgad.InputError, a ValueError, with its one-line
// message.
#include "arrays.hpp"
#include "bindings.hpp"

#include "cgad/core/errors.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_cgad, m) {
  m.doc() = "cgad's C++ libraries (reference, fast path, theory, differential, bench) for the cgad Python package";
  m.attr("__version__") = CGAD_VERSION;  // the CMake project's version
  py::register_exception<cgad::core::InputError>(m, "InputError", PyExc_ValueError);
  cgad::python::bind_arrays(m);
  cgad::python::bind_step_config(m);
  cgad::python::bind_cpu_optimizer(m);
  cgad::python::bind_cuda_optimizer(m);
  cgad::python::bind_numerics(m);
  cgad::python::bind_differential(m);
  cgad::python::bind_bench(m);
}
