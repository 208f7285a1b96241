// `cgad._numerics`: cgad's numerics for the cgad Python package (cgad.numerics, cgad.differential, cgad.bench) --
// the reference, theory, differential and bench libraries, with MPFR, GMP and MPFI. Imported only by those modules,
// so `import cgad.torch` never loads it (docs/design.md §7). Its refusals are cgad.InputError, the class
// `cgad._cgad` defines: a translator local to this module raises that class, so `except cgad.InputError` catches
// both modules' errors.
#include "numerics_bindings.hpp"

#include "cgad/core/errors.hpp"

#include <exception>

namespace py = pybind11;

PYBIND11_MODULE(_numerics, m) {
  m.doc() = "cgad's numerics (reference, theory, differential, bench) for the cgad Python package";
  // Kept for the process's life, as pybind11's own registered exception types are.
  static const py::handle input_error = py::object(py::module_::import("cgad._cgad").attr("InputError")).release();
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cgad::core::InputError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    }
  });
  cgad::python::bind_numerics(m);
  cgad::python::bind_differential(m);
  cgad::python::bind_bench(m);
}
