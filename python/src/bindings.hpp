#pragma once
// The parts of the `cgad._cgad` module (module.cpp registers them), and what both modules share (`cgad._numerics`,
// numerics_bindings.hpp, takes the same option dicts): the configuration a Python caller describes, and a step report
// as a Python dict. Nothing here reaches the reference or MPFR (docs/design.md §7, "The two modules").
#include "cgad/core/optimizer_options.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/options.hpp"
#include "cgad/fastpath/step_counters.hpp"

#include "cgad/core/errors.hpp"

#include <pybind11/pybind11.h>

#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace cgad::python {

// One option's value as T, refusing (InputError, naming the key) what pybind11's conversion refuses -- a wrong type,
// an integer outside T's range -- and what it would take silently: a bool (or a float) for an integer.
template <class T>
T option_value(const pybind11::handle& value, const char* key) {
  const auto refuse = [&](const std::string& what) {
    std::string shown = pybind11::repr(value).cast<std::string>();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    throw core::InputError(std::string(key) + " must be " + what + ", got " + shown);
  };
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const std::string range = "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                              std::to_string(std::numeric_limits<T>::max()) + "]";
    if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) refuse(range);
    try {
      return pybind11::cast<T>(value);
    } catch (const pybind11::cast_error&) {
      refuse(range);
    }
  } else {
    try {
      return pybind11::cast<T>(value);
    } catch (const pybind11::cast_error&) {
      refuse(std::is_same_v<T, std::string> ? "a string" : std::is_floating_point_v<T> ? "a real number" : "valid");
    }
  }
  throw std::logic_error("unreachable");
}

// options[key] into `field` where the key is present (and, for an optional field, not None).
template <class T>
void take(const pybind11::dict& options, const char* key, T& field) {
  if (options.contains(key)) field = option_value<T>(options[key], key);
}
template <class T>
void take(const pybind11::dict& options, const char* key, std::optional<T>& field) {
  if (options.contains(key) && !options[key].is_none()) field = option_value<T>(options[key], key);
}

// The options as `cgad replay`'s flags fill them, from a dict whose absent keys keep the defaults (options.cpp).
core::OptimizerOptions optimizer_options(const pybind11::dict& options);
fastpath::FastpathOptions fastpath_options(const pybind11::dict& options);

// A fast-path configuration from a cgad.torch optimizer's options (step_config.cpp).
fastpath::StepConfig step_config(const pybind11::dict& spec);

// The counters as the state file holds them, {"t", "last_sync", "round", "steps"}, and back (InputError naming a
// missing or ill-typed key), for both backends' steppers (counters.cpp).
pybind11::dict counters_dict(const fastpath::StepCounters& counters);
fastpath::StepCounters counters_from_dict(const pybind11::dict& counters);

// {"applied", "reason", "nonfinite_index", "tau_effective", "sigma"}: the report of one step.
pybind11::dict report_dict(const fastpath::StepReport& report);

void bind_step_config(pybind11::module_& m);     // step_config.cpp
void bind_cpu_optimizer(pybind11::module_& m);   // cpu_optimizer.cpp
void bind_cuda_optimizer(pybind11::module_& m);  // cuda_optimizer.cpp
void bind_gate(pybind11::module_& m);            // gate.cpp
void bind_trap_counter(pybind11::module_& m);    // trap_counter.cpp
void bind_state_keys(pybind11::module_& m);      // state_keys.cpp
void bind_schedule(pybind11::module_& m);        // schedule.cpp

}  // namespace cgad::python
