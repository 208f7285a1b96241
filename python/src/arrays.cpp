// NumPy arrays through NumPy's Python API (arrays.hpp says why).
#include "arrays.hpp"

namespace py = pybind11;

namespace cgad::python {

py::object numpy_frombuffer(const py::object& buffer, const std::string& format) {
  return py::module_::import("numpy").attr("frombuffer")(buffer, py::arg("dtype") = format);
}

void bind_arrays(py::module_& m) {
  py::class_<OwnedBuffer>(m, "_OwnedBuffer", py::buffer_protocol()).def_buffer([](OwnedBuffer& b) {
    return py::buffer_info(b.data, b.itemsize, b.format, 1, {b.count}, {b.itemsize}, /*readonly=*/false);
  });
}

}  // namespace cgad::python
