// `CpuOptimizer`: fastpath::CpuOptimizer over the caller's tensors where they lie (its tensor-table step), one per
// torch param group. The step releases the GIL: it touches only the tensors' memory and its own state.
#include "bindings.hpp"
#include "pointers.hpp"

#include "cgad/fastpath/fastpath.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace cgad::python {
namespace {

using fastpath::CpuOptimizer;
using fastpath::StepReport;

StepReport step(CpuOptimizer& o, const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads,
                std::int64_t tau, std::size_t fragment) {
  const std::vector<const float*> g = pointers<const float>(grads);
  if (o.config().params == fastpath::ParamFormat::fp32) {
    const std::vector<float*> p = pointers<float>(params);
    py::gil_scoped_release release;
    return o.step(std::span<float* const>(p), std::span<const float* const>(g), tau, fragment);
  }
  const std::vector<fastpath::bf16*> p = pointers<fastpath::bf16>(params);
  py::gil_scoped_release release;
  return o.step(std::span<fastpath::bf16* const>(p), std::span<const float* const>(g), tau, fragment);
}

}  // namespace

void bind_cpu_optimizer(py::module_& m) {
  py::class_<CpuOptimizer>(m, "CpuOptimizer")
      .def(py::init([](const py::dict& spec, std::vector<std::size_t> tensor_sizes, unsigned threads) {
             return std::make_unique<CpuOptimizer>(step_config(spec), std::move(tensor_sizes), threads);
           }),
           py::arg("spec"), py::arg("tensor_sizes"), py::arg("threads") = 0)
      .def(
          "step",
          [](CpuOptimizer& o, const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads,
             std::int64_t tau, std::size_t fragment) { return report_dict(step(o, params, grads, tau, fragment)); },
          py::arg("params"), py::arg("grads"), py::arg("tau"), py::arg("fragment") = 0)
      .def(
          "preview",
          [](CpuOptimizer& o, const std::vector<std::uintptr_t>& grads, std::int64_t tau, std::size_t fragment) {
            const std::vector<const float*> g = pointers<const float>(grads);
            StepReport report;
            {
              py::gil_scoped_release release;
              report = o.preview(std::span<const float* const>(g), tau, fragment);
            }
            return report_dict(report);
          },
          py::arg("grads"), py::arg("tau"), py::arg("fragment") = 0)
      .def("advance_round", &CpuOptimizer::advance_round)
      .def("set_hyperparameters",
           [](CpuOptimizer& o, const py::dict& spec) { o.set_hyperparameters(step_config(spec)); })
      .def("save_bytes",
           [](const CpuOptimizer& o) {
             const std::vector<unsigned char> bytes = o.save_bytes();
             return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
           })
      .def("load_bytes", [](CpuOptimizer& o, const py::buffer& bytes) { o.load_bytes(byte_span(bytes.request())); })
      .def("read_buffer",
           [](const CpuOptimizer& o, const std::string& name) {
             py::array_t<float> out(static_cast<py::ssize_t>(o.parameters()));
             o.read_buffer(name, std::span<float>(out.mutable_data(), o.parameters()));
             return out;
           })
      .def("counters",
           [](const CpuOptimizer& o) {
             py::dict out;
             for (const auto& c : o.counters()) out[py::str(c.name)] = c.values;
             return out;
           })
      .def_property_readonly("buffer_names", &CpuOptimizer::buffer_names)
      .def_property_readonly("parameters", &CpuOptimizer::parameters)
      .def_property_readonly("threads", &CpuOptimizer::threads)
      .def_property_readonly("tensor_sizes", [](const CpuOptimizer& o) { return o.planner().tensor_sizes(); });
}

}  // namespace cgad::python
