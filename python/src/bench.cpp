// The roofline of a step for Python benchmarks (bench/torch_peers.py): the step's in-place twin,
// cgad::bench::InPlaceWorkload -- one pass over buffers laid out as the step's that reads and writes, in place,
// exactly the bytes one step of that configuration moves (bench::step_bytes), with its arithmetic left out.
// The configuration is named as cgad.torch names it (optimizer, params and state formats as text) and goes
// through step_config() (step_config.cpp), so an unknown name is the same InputError (a ValueError) there as here.
#include "numerics_bindings.hpp"

#include "cgad/bench/workloads.hpp"
#include "cgad/core/errors.hpp"

#include <pybind11/stl.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>

namespace py = pybind11;

namespace cgad::python {
namespace {

fastpath::StepConfig twin_config(const std::string& params, const std::string& state, const std::string& optimizer) {
  py::dict spec;
  spec["optimizer"] = optimizer;
  spec["params"] = params;
  spec["state"] = state;
  return step_config(spec);
}

void check_timing(double min_seconds, int samples) {
  if (!(std::isfinite(min_seconds) && min_seconds >= 0)) {
    throw core::InputError("min_seconds must be a finite number >= 0, got " + std::to_string(min_seconds));
  }
  if (samples < 1) throw core::InputError("samples must be >= 1, got " + std::to_string(samples));
}

void check_size(std::size_t n) {
  if (n == 0) throw core::InputError("n must be >= 1");
}

}  // namespace

void bind_bench(py::module_& m) {
  // The twin kept alive, for timing it alternately with something else in the same process.
  py::class_<bench::InPlaceWorkload>(m, "InPlaceTwin",
                                     "The in-place twin of a step (the roofline): InPlaceTwin(params, state, "
                                     "optimizer, n, threads); threads = 0 for every core.")
      .def(py::init([](const std::string& params, const std::string& state, const std::string& optimizer, std::size_t n,
                       unsigned threads) {
             check_size(n);
             return std::make_unique<bench::InPlaceWorkload>(twin_config(params, state, optimizer), n, threads);
           }),
           py::arg("params"), py::arg("state"), py::arg("optimizer"), py::arg("n"), py::arg("threads"))
      .def("run", &bench::InPlaceWorkload::run, py::call_guard<py::gil_scoped_release>(),
           "one in-place pass over the step's bytes")
      .def(
          "time",
          [](bench::InPlaceWorkload& twin, double min_seconds) {
            check_timing(min_seconds, 1);
            py::gil_scoped_release release;
            return bench::time_runs(twin, min_seconds);
          },
          py::arg("min_seconds"), "seconds per run over enough runs to last min_seconds")
      .def_property_readonly("bytes", &bench::InPlaceWorkload::bytes, "bytes one run (one step) moves");

  m.def(
      "roofline_seconds",
      [](const std::string& params, const std::string& state, const std::string& optimizer, std::size_t n,
         unsigned threads, double min_seconds, int samples) {
        check_size(n);
        check_timing(min_seconds, samples);
        const fastpath::StepConfig config = twin_config(params, state, optimizer);
        py::gil_scoped_release release;
        bench::InPlaceWorkload twin(config, n, threads);
        return bench::measure(twin, min_seconds, samples);
      },
      py::arg("params"), py::arg("state"), py::arg("optimizer"), py::arg("n"), py::arg("threads"),
      py::arg("min_seconds"), py::arg("samples") = 5,
      "seconds per run of the step's in-place twin (the median of `samples` timings of at least min_seconds each)");
  m.def(
      "cpu_isa", [] { return std::string(fastpath::to_string(fastpath::selected_cpu_isa())); },
      "the instruction set the CPU step and its twin run: generic, avx2 or avx512 (CGAD_CPU_ISA chooses a slower one)");
  m.def(
      "step_bytes",
      [](const std::string& params, const std::string& state, const std::string& optimizer, std::size_t n) {
        return bench::step_bytes(twin_config(params, state, optimizer), n);
      },
      py::arg("params"), py::arg("state"), py::arg("optimizer"), py::arg("n"),
      "bytes one fast-path step of this configuration reads and writes for n parameters");
}

}  // namespace cgad::python
