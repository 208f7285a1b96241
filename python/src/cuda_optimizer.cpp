// `CudaOptimizer`: fastpath::CudaOptimizer for torch parameters on a CUDA device, one per param group, stepping on
// the caller's stream (torch's current stream, passed as an integer: 0 is the legacy default stream). Its steps take
// the group's tensors where they lie: one device pointer per parameter and per pseudo-gradient (CudaOptimizer's table
// step, nothing gathered or scattered). A step returns its ticket at once and report(ticket) reads its report when
// asked (cuda_optimizer.hpp), so that cgad.torch's step waits for nothing (_groups.py's CudaGroup). The state moves
// through state_file.hpp's bytes in memory and new hyperparameters go to the device optimizer as they are; nothing
// touches a file. `CudaEventVeto` is the device word the param groups of one event share (a refusal in any changes
// none). In a build without the CUDA backend, or with no device, constructing either is an InputError, and
// cuda_available() / cuda_unavailable_reason() say so beforehand.
#include "bindings.hpp"
#include "pointers.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"

#include "arrays.hpp"
#include <pybind11/stl.h>

#include <memory>

namespace py = pybind11;

namespace cgad::python {
namespace {

using fastpath::CudaEventVeto;
using fastpath::CudaOptimizer;

CUstream_st* as_stream(std::uintptr_t stream) {
  return reinterpret_cast<CUstream_st*>(stream);
}

const CudaEventVeto* as_veto(const py::object& veto) {
  return veto.is_none() ? nullptr : &veto.cast<const CudaEventVeto&>();
}

// The table step, or the second half of a previewed one, in the optimizer's parameter format.
std::uint64_t step_table(CudaOptimizer& o, const std::vector<std::uintptr_t>& params,
                         const std::vector<std::uintptr_t>& grads, const std::int64_t* tau, std::size_t fragment,
                         const CudaEventVeto* veto, std::uintptr_t stream) {
  const std::vector<const float*> g = pointers<const float>(grads);
  const auto run = [&](auto p) {
    py::gil_scoped_release release;
    return tau != nullptr ? o.step(p, std::span<const float* const>(g), *tau, fragment, as_stream(stream))
                          : o.step_previewed(p, std::span<const float* const>(g), veto, as_stream(stream));
  };
  if (o.config().params == fastpath::ParamFormat::fp32) {
    const std::vector<float*> p = pointers<float>(params);
    return run(std::span<float* const>(p));
  }
  const std::vector<fastpath::bf16*> p = pointers<fastpath::bf16>(params);
  return run(std::span<fastpath::bf16* const>(p));
}

}  // namespace

void bind_cuda_optimizer(py::module_& m) {
  m.def("cuda_available", &fastpath::cuda_device_available,
        "True when this build has the CUDA backend and the process sees a CUDA device");
  m.def("cuda_unavailable_reason", &fastpath::cuda_unavailable_reason, "why not, in one line (empty when available)");
  py::class_<CudaEventVeto>(m, "CudaEventVeto")
      .def(py::init([](std::uintptr_t stream) { return std::make_unique<CudaEventVeto>(as_stream(stream)); }),
           py::arg("stream"))
      .def(
          "reset", [](CudaEventVeto& v, std::uintptr_t stream) { v.reset(as_stream(stream)); }, py::arg("stream"))
      .def(
          "finish", [](CudaEventVeto& v, std::uintptr_t stream) { v.finish(as_stream(stream)); }, py::arg("stream"));
  py::class_<CudaOptimizer>(m, "CudaOptimizer")
      .def(py::init([](const py::dict& spec, std::vector<std::size_t> sizes) {
             return std::make_unique<CudaOptimizer>(step_config(spec), std::move(sizes));
           }),
           py::arg("spec"), py::arg("tensor_sizes"))
      .def(
          "step",
          [](CudaOptimizer& o, const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads,
             std::int64_t tau, std::size_t fragment,
             std::uintptr_t stream) { return step_table(o, params, grads, &tau, fragment, nullptr, stream); },
          py::arg("params"), py::arg("grads"), py::arg("tau"), py::arg("fragment"), py::arg("stream"))
      .def(
          "preview",
          [](CudaOptimizer& o, const std::vector<std::uintptr_t>& grads, std::int64_t tau, std::size_t fragment,
             const py::object& veto, std::uintptr_t stream) {
            const std::vector<const float*> g = pointers<const float>(grads);
            auto* v = veto.is_none() ? nullptr : &veto.cast<CudaEventVeto&>();
            py::gil_scoped_release release;
            o.preview(std::span<const float* const>(g), tau, fragment, v, as_stream(stream));
          },
          py::arg("grads"), py::arg("tau"), py::arg("fragment"), py::arg("veto"), py::arg("stream"))
      .def(
          "step_previewed",
          [](CudaOptimizer& o, const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads,
             const py::object& veto,
             std::uintptr_t stream) { return step_table(o, params, grads, nullptr, 0, as_veto(veto), stream); },
          py::arg("params"), py::arg("grads"), py::arg("veto"), py::arg("stream"))
      .def(
          "report",
          [](CudaOptimizer& o, std::uint64_t ticket, std::uintptr_t stream) {
            fastpath::CudaStepReport r;
            {
              py::gil_scoped_release release;
              r = o.report(ticket, as_stream(stream));
            }
            return py::make_tuple(report_dict(r.own), r.vetoed);
          },
          py::arg("ticket"), py::arg("stream"), "(the step's own report as a dict, whether a shared veto stopped it)")
      .def(
          "advance_round", [](CudaOptimizer& o, std::uintptr_t stream) { o.advance_round(as_stream(stream)); },
          py::arg("stream") = 0)
      .def(
          "set_hyperparameters",
          [](CudaOptimizer& o, const py::dict& spec, std::uintptr_t stream) {
            o.set_hyperparameters(step_config(spec), as_stream(stream));
          },
          py::arg("spec"), py::arg("stream") = 0)
      .def(
          "save_bytes",
          [](CudaOptimizer& o, std::uintptr_t stream) {
            const std::vector<unsigned char> bytes = o.save_bytes(as_stream(stream));
            return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          },
          py::arg("stream") = 0)
      .def(
          "load_bytes",
          [](CudaOptimizer& o, const py::buffer& bytes, std::uintptr_t stream) {
            o.load_bytes(byte_span(bytes.request()), as_stream(stream));
          },
          py::arg("bytes"), py::arg("stream") = 0)
      .def("read_buffer",
           [](CudaOptimizer& o, const std::string& name) {
             auto [out, values] = numpy_empty<float>(o.parameters());
             o.read_buffer(name, values);
             return out;
           })
      .def("counters", [](CudaOptimizer& o) {
        py::dict out;
        for (const auto& c : o.counters()) out[py::str(c.name)] = c.values;
        return out;
      });
}

}  // namespace cgad::python
