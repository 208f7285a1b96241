// `CudaStepper`: fastpath::CudaTableStepper for torch parameters on a CUDA device, one per param group, over the
// caller's tensors where they lie -- parameters, pseudo-gradients and optimizer state, all torch tensors allocated by
// torch on the parameter's device (cgad.torch's param groups, the same as on the CPU: _groups.py) -- stepping on the
// caller's stream (torch's current stream, passed as an integer: 0 is the legacy default stream). A step returns its
// ticket at once and report(ticket) reads its report when asked (cuda_table_stepper.hpp), so that cgad.torch's step
// waits for nothing. `CudaEventVeto` is the device word the param groups of one event share (a refusal in any changes
// none). In a build without the CUDA backend, or with no device, constructing either is an InputError, and
// cuda_available() / cuda_unavailable_reason() say so beforehand.
#include "bindings.hpp"
#include "pointers.hpp"

#include "cgad/fastpath/cuda_table_stepper.hpp"

#include <pybind11/stl.h>

#include <memory>

namespace py = pybind11;

namespace cgad::python {
namespace {

using fastpath::CudaEventVeto;
using fastpath::CudaTableStepper;
using fastpath::TensorState;

CUstream_st* as_stream(std::uintptr_t stream) {
  return reinterpret_cast<CUstream_st*>(stream);
}

// Per tensor, its state's buffer pointers (CudaTableStepper::entry's order); an empty list for a tensor left out.
std::vector<TensorState> entries(const CudaTableStepper& s, const std::vector<std::vector<std::uintptr_t>>& states) {
  std::vector<TensorState> out(states.size());
  for (std::size_t k = 0; k < states.size(); ++k) {
    if (!states[k].empty()) out[k] = s.entry(k, pointers<void>(states[k]));
  }
  return out;
}

// The step, or the second half of a previewed one (tau null), in the stepper's parameter format.
std::uint64_t step_table(CudaTableStepper& s, const std::vector<std::uintptr_t>& params,
                         const std::vector<std::uintptr_t>& grads,
                         const std::vector<std::vector<std::uintptr_t>>& states, const std::int64_t* tau,
                         std::size_t fragment, const py::object& veto, std::uintptr_t stream) {
  const std::vector<const float*> g = pointers<const float>(grads);
  const std::vector<TensorState> e = entries(s, states);
  const CudaEventVeto* v = veto.is_none() ? nullptr : &veto.cast<const CudaEventVeto&>();
  const auto run = [&](auto p) {
    py::gil_scoped_release release;
    return tau != nullptr ? s.step(p, std::span<const float* const>(g), e, *tau, fragment, as_stream(stream))
                          : s.step_previewed(p, std::span<const float* const>(g), e, v, as_stream(stream));
  };
  if (s.config().params == fastpath::ParamFormat::fp32) {
    const std::vector<float*> p = pointers<float>(params);
    return run(std::span<float* const>(p));
  }
  const std::vector<fastpath::bf16*> p = pointers<fastpath::bf16>(params);
  return run(std::span<fastpath::bf16* const>(p));
}

py::dict raw_counters(CudaTableStepper& s, std::uintptr_t stream) {
  return counters_dict(s.raw_counters(as_stream(stream)));
}

void set_raw_counters(CudaTableStepper& s, const py::dict& counters, std::uintptr_t stream) {
  s.set_raw_counters(counters_from_dict(counters), as_stream(stream));
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
  py::class_<CudaTableStepper>(m, "CudaStepper")
      .def(py::init([](const py::dict& spec, std::vector<std::size_t> sizes, std::uintptr_t stream) {
             return std::make_unique<CudaTableStepper>(step_config(spec), std::move(sizes), as_stream(stream));
           }),
           py::arg("spec"), py::arg("tensor_sizes"), py::arg("stream"))
      .def(
          "step",
          [](CudaTableStepper& s, const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads,
             const std::vector<std::vector<std::uintptr_t>>& states, std::int64_t tau, std::size_t fragment,
             std::uintptr_t stream) {
            return step_table(s, params, grads, states, &tau, fragment, py::none(), stream);
          },
          py::arg("params"), py::arg("grads"), py::arg("states"), py::arg("tau"), py::arg("fragment"),
          py::arg("stream"))
      .def(
          "preview",
          [](CudaTableStepper& s, const std::vector<std::uintptr_t>& grads, std::int64_t tau, std::size_t fragment,
             const py::object& veto, std::uintptr_t stream) {
            const std::vector<const float*> g = pointers<const float>(grads);
            auto* v = veto.is_none() ? nullptr : &veto.cast<CudaEventVeto&>();
            py::gil_scoped_release release;
            s.preview(std::span<const float* const>(g), tau, fragment, v, as_stream(stream));
          },
          py::arg("grads"), py::arg("tau"), py::arg("fragment"), py::arg("veto"), py::arg("stream"))
      .def(
          "step_previewed",
          [](CudaTableStepper& s, const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads,
             const std::vector<std::vector<std::uintptr_t>>& states, const py::object& veto,
             std::uintptr_t stream) { return step_table(s, params, grads, states, nullptr, 0, veto, stream); },
          py::arg("params"), py::arg("grads"), py::arg("states"), py::arg("veto"), py::arg("stream"))
      .def(
          "report",
          [](CudaTableStepper& s, std::uint64_t ticket, std::uintptr_t stream) {
            fastpath::CudaStepReport r;
            {
              py::gil_scoped_release release;
              r = s.report(ticket, as_stream(stream));
            }
            return py::make_tuple(report_dict(r.own), r.vetoed);
          },
          py::arg("ticket"), py::arg("stream"), "(the step's own report as a dict, whether a shared veto stopped it)")
      .def(
          "advance_round", [](CudaTableStepper& s, std::uintptr_t stream) { s.advance_round(as_stream(stream)); },
          py::arg("stream"))
      .def(
          "set_hyperparameters",
          [](CudaTableStepper& s, const py::dict& spec, std::uintptr_t stream) {
            s.set_hyperparameters(step_config(spec), as_stream(stream));
          },
          py::arg("spec"), py::arg("stream"))
      .def(
          "counters",
          [](CudaTableStepper& s, std::uintptr_t stream) {
            py::dict out;
            for (const auto& c : s.counters(as_stream(stream))) out[py::str(c.name)] = c.values;
            return out;
          },
          py::arg("stream"))
      .def("raw_counters", &raw_counters, py::arg("stream"))
      .def("set_raw_counters", &set_raw_counters, py::arg("counters"), py::arg("stream"))
      .def_property_readonly("parameters", &CudaTableStepper::parameters)
      .def_property_readonly("tensor_sizes", [](const CudaTableStepper& s) { return s.tensor_sizes(); });
}

}  // namespace cgad::python
