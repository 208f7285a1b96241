// `CpuStepper`: fastpath::TableStepper over the caller's tensors where they lie -- parameters, pseudo-gradients and
// optimizer state, all torch tensors (cgad.torch's CPU param groups, one per group, sharing one `ThreadPool` per
// torch optimizer). The steps release the GIL: they touch only the tensors' memory.
#include "bindings.hpp"
#include "pointers.hpp"

#include "cgad/fastpath/table_stepper.hpp"
#include "cgad/fastpath/thread_pool.hpp"

#include "arrays.hpp"
#include <pybind11/stl.h>

namespace py = pybind11;

namespace cgad::python {
namespace {

using fastpath::StepReport;
using fastpath::TableStepper;
using fastpath::TensorState;
using fastpath::ThreadPool;

// Per tensor, its state's buffer pointers (TableStepper::entry's order); an empty list for a tensor left out.
std::vector<TensorState> entries(const TableStepper& s, const std::vector<std::vector<std::uintptr_t>>& states) {
  std::vector<TensorState> out(states.size());
  for (std::size_t k = 0; k < states.size(); ++k) {
    if (!states[k].empty()) out[k] = s.entry(k, pointers<void>(states[k]));
  }
  return out;
}

StepReport stepper_step(TableStepper& s, const std::vector<std::uintptr_t>& params,
                        const std::vector<std::uintptr_t>& grads,
                        const std::vector<std::vector<std::uintptr_t>>& states, std::int64_t tau, std::size_t fragment,
                        bool reuse_preview) {
  const std::vector<const float*> g = pointers<const float>(grads);
  const std::vector<TensorState> e = entries(s, states);
  if (s.config().params == fastpath::ParamFormat::fp32) {
    const std::vector<float*> p = pointers<float>(params);
    py::gil_scoped_release release;
    return s.step(std::span<float* const>(p), std::span<const float* const>(g), e, tau, fragment, reuse_preview);
  }
  const std::vector<fastpath::bf16*> p = pointers<fastpath::bf16>(params);
  py::gil_scoped_release release;
  return s.step(std::span<fastpath::bf16* const>(p), std::span<const float* const>(g), e, tau, fragment, reuse_preview);
}

py::dict shape_dict(const TableStepper& s, std::size_t k) {
  const fastpath::TensorStateShape shape = s.shape(k);
  py::dict out;
  out["kind"] = std::string(shape.kind);
  out["moments"] = shape.moments;
  out["values"] = shape.values;
  out["absmax"] = shape.absmax;
  out["initial_codes"] = std::vector<int>(shape.initial_code, shape.initial_code + shape.moments);
  return out;
}

template <class O>
py::dict raw_counters(const O& o) {
  return counters_dict(o.raw_counters());
}

template <class O>
void set_raw_counters(O& o, const py::dict& counters) {
  o.set_raw_counters(counters_from_dict(counters));
}

}  // namespace

void bind_cpu_optimizer(py::module_& m) {
  py::class_<ThreadPool, std::shared_ptr<ThreadPool>>(m, "ThreadPool")
      .def(py::init<unsigned>(), py::arg("threads") = 0)
      .def_property_readonly("threads", &ThreadPool::threads);
  py::class_<TableStepper>(m, "CpuStepper")
      .def(py::init([](const py::dict& spec, std::vector<std::size_t> tensor_sizes, std::shared_ptr<ThreadPool> pool) {
             return std::make_unique<TableStepper>(step_config(spec), std::move(tensor_sizes), std::move(pool));
           }),
           py::arg("spec"), py::arg("tensor_sizes"), py::arg("pool"))
      .def(
          "step",
          [](TableStepper& s, const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads,
             const std::vector<std::vector<std::uintptr_t>>& states, std::int64_t tau, std::size_t fragment,
             bool reuse_preview) {
            return report_dict(stepper_step(s, params, grads, states, tau, fragment, reuse_preview));
          },
          py::arg("params"), py::arg("grads"), py::arg("states"), py::arg("tau"), py::arg("fragment") = 0,
          py::arg("reuse_preview") = false)
      .def(
          "preview",
          [](TableStepper& s, const std::vector<std::uintptr_t>& grads, std::int64_t tau, std::size_t fragment) {
            const std::vector<const float*> g = pointers<const float>(grads);
            StepReport report;
            {
              py::gil_scoped_release release;
              report = s.preview(std::span<const float* const>(g), tau, fragment);
            }
            return report_dict(report);
          },
          py::arg("grads"), py::arg("tau"), py::arg("fragment") = 0)
      .def(
          "form_pseudo_gradient",
          [](TableStepper& s, const std::vector<std::uintptr_t>& start, const std::vector<std::uintptr_t>& params,
             const std::vector<std::uintptr_t>& deltas) {
            const std::vector<const float*> a = pointers<const float>(start), b = pointers<const float>(params);
            const std::vector<float*> out = pointers<float>(deltas);
            py::gil_scoped_release release;
            s.form_pseudo_gradient(a, b, out);
          },
          py::arg("start"), py::arg("params"), py::arg("deltas"))
      .def("shape", &shape_dict, py::arg("k"))
      .def(
          "check_states",
          [](const TableStepper& s, const std::vector<std::vector<std::uintptr_t>>& states,
             const std::vector<std::size_t>& which) {
            const std::vector<TensorState> e = entries(s, states);
            py::gil_scoped_release release;
            s.check_states(e, which);
          },
          py::arg("states"), py::arg("which"))
      .def(
          "read_state",
          [](const TableStepper& s, const std::vector<std::uintptr_t>& buffers, std::size_t k, int moment) {
            const TensorState e = s.entry(k, pointers<void>(buffers));
            auto [out, values] = numpy_empty<float>(s.shape(k).values);
            s.read_state(e, k, moment, values);
            return out;
          },
          py::arg("buffers"), py::arg("k"), py::arg("moment"))
      .def("advance_round", &TableStepper::advance_round)
      .def("set_hyperparameters",
           [](TableStepper& s, const py::dict& spec) { s.set_hyperparameters(step_config(spec)); })
      .def("counters",
           [](const TableStepper& s) {
             py::dict out;
             for (const auto& c : s.counters()) out[py::str(c.name)] = c.values;
             return out;
           })
      .def("raw_counters", &raw_counters<TableStepper>)
      .def("set_raw_counters", &set_raw_counters<TableStepper>, py::arg("counters"))
      .def_property_readonly("parameters", &TableStepper::parameters)
      .def_property_readonly("threads", &TableStepper::threads)
      .def_property_readonly("tensor_sizes", [](const TableStepper& s) { return s.tensor_sizes(); });
}

}  // namespace cgad::python
