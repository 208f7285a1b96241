#pragma once
// The parts of the `cgad._cgad` module (module.cpp registers them), and what they share: the configuration a
// Python caller describes, and a step report as a Python dict.
#include "cgad/differential/optimizer_options.hpp"
#include "cgad/differential/replay_fastpath.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/step_planner.hpp"

#include <pybind11/pybind11.h>

#include <optional>

namespace cgad::python {

// options[key] into `field` where the key is present (and, for an optional field, not None).
template <class T>
void take(const pybind11::dict& options, const char* key, T& field) {
  if (options.contains(key)) field = pybind11::cast<T>(options[key]);
}
template <class T>
void take(const pybind11::dict& options, const char* key, std::optional<T>& field) {
  if (options.contains(key) && !options[key].is_none()) field = pybind11::cast<T>(options[key]);
}

// The options as `cgad replay`'s flags fill them, from a dict whose absent keys keep the defaults (options.cpp).
differential::OptimizerOptions optimizer_options(const pybind11::dict& options);
differential::FastpathOptions fastpath_options(const pybind11::dict& options);

// A fast-path configuration from a cgad.torch optimizer's options (step_config.cpp).
fastpath::StepConfig step_config(const pybind11::dict& spec);

// {"applied", "reason", "nonfinite_index", "tau_effective", "sigma"}: the report of one step.
pybind11::dict report_dict(const fastpath::StepReport& report);

void bind_step_config(pybind11::module_& m);     // step_config.cpp
void bind_cpu_optimizer(pybind11::module_& m);   // cpu_optimizer.cpp
void bind_cuda_optimizer(pybind11::module_& m);  // cuda_optimizer.cpp
void bind_numerics(pybind11::module_& m);        // numerics.cpp
void bind_differential(pybind11::module_& m);    // differential.cpp
void bind_bench(pybind11::module_& m);           // bench.cpp

}  // namespace cgad::python
