#pragma once
// The parts of the `cgad._cgad` module (module.cpp registers them), and what they share: the configuration a
// Python caller describes, and a step report as a Python dict.
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/step_planner.hpp"

#include <pybind11/pybind11.h>

namespace cgad::python {

// A fast-path configuration from a cgad.torch optimizer's options (step_config.cpp).
fastpath::StepConfig step_config(const pybind11::dict& spec);

// {"applied", "reason", "nonfinite_index", "tau_effective", "sigma"}: the report of one step.
pybind11::dict report_dict(const fastpath::StepReport& report);

void bind_step_config(pybind11::module_& m);     // step_config.cpp
void bind_cpu_optimizer(pybind11::module_& m);   // cpu_optimizer.cpp
void bind_cuda_optimizer(pybind11::module_& m);  // cuda_optimizer.cpp
void bind_numerics(pybind11::module_& m);        // numerics.cpp
void bind_differential(pybind11::module_& m);    // differential.cpp

}  // namespace cgad::python
