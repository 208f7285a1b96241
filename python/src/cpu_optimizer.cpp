// `CpuOptimizer`: fastpath::CpuOptimizer over the caller's tensors where they lie (its tensor-table step), one per
// torch param group. The step releases the GIL: it touches only the tensors' memory and its own state.
#include "bindings.hpp"
#include "pointers.hpp"

#include "cgad/fastpath/fastpath.hpp"

#include "arrays.hpp"
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

// Tensor k's live state: {"format": "fp32" | "bf16" | "q8" | "fp32-fallback" (a q8 configuration's tensor under
// min_q8_size), "moments": one dict per moment, {"values": float32 or int16 (the bf16 bits) array} or
// {"codes": uint8 array, "absmax": float32 array, one per chunk}}.
py::dict tensor_state(const py::object& self, std::size_t k) {
  CpuOptimizer& o = self.cast<CpuOptimizer&>();
  const fastpath::TensorState t = o.tensor_state(k);
  const fastpath::StateFormat format = o.config().state;
  py::list moments;
  for (int m = 0; m < t.moments; ++m) {
    py::dict moment;
    if (format == fastpath::StateFormat::bf16) {
      moment["values"] = numpy_view<std::int16_t>(t.bf16_values[m], self);
    } else if (format == fastpath::StateFormat::fp32 || t.fp32_fallback) {
      moment["values"] = numpy_view<float>(t.fp32[m], self);
    } else {
      moment["codes"] = numpy_view<std::uint8_t>(t.codes[m], self);
      moment["absmax"] = numpy_view<float>(t.absmax[m], self);
    }
    moments.append(moment);
  }
  py::dict out;
  out["format"] = t.fp32_fallback ? std::string("fp32-fallback") : std::string(fastpath::to_string(format));
  out["moments"] = moments;
  return out;
}

py::dict raw_counters(const CpuOptimizer& o) {
  const fastpath::StepCounters& c = o.raw_counters();
  py::dict out;
  out["t"] = c.t;
  out["last_sync"] = c.last_sync;
  out["round"] = c.round;
  out["steps"] = c.steps;
  return out;
}

void set_raw_counters(CpuOptimizer& o, const py::dict& counters) {
  fastpath::StepCounters c;
  for (const char* key : {"t", "last_sync", "round", "steps"}) {
    if (!counters.contains(key)) throw core::InputError(std::string("the counters have no '") + key + "'");
  }
  c.t = option_value<std::vector<std::int64_t>>(counters["t"], "t");
  c.last_sync = option_value<std::vector<std::int64_t>>(counters["last_sync"], "last_sync");
  c.round = option_value<std::int64_t>(counters["round"], "round");
  c.steps = option_value<std::uint64_t>(counters["steps"], "steps");
  o.set_raw_counters(std::move(c));
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
             auto [out, values] = numpy_empty<float>(o.parameters());
             o.read_buffer(name, values);
             return out;
           })
      .def("counters",
           [](const CpuOptimizer& o) {
             py::dict out;
             for (const auto& c : o.counters()) out[py::str(c.name)] = c.values;
             return out;
           })
      .def("tensor_state", &tensor_state, py::arg("k"))
      .def("raw_counters", &raw_counters)
      .def("set_raw_counters", &set_raw_counters, py::arg("counters"))
      .def_property_readonly("buffer_names", &CpuOptimizer::buffer_names)
      .def_property_readonly("parameters", &CpuOptimizer::parameters)
      .def_property_readonly("threads", &CpuOptimizer::threads)
      .def_property_readonly("tensor_sizes", [](const CpuOptimizer& o) { return o.tensor_sizes(); });
}

}  // namespace cgad::python
