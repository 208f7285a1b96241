#include "bindings.hpp"

#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace cgad::python {

py::dict counters_dict(const fastpath::StepCounters& c) {
  py::dict out;
  out["t"] = c.t;
  out["last_sync"] = c.last_sync;
  out["round"] = c.round;
  out["steps"] = c.steps;
  return out;
}

fastpath::StepCounters counters_from_dict(const py::dict& counters) {
  for (const char* key : {"t", "last_sync", "round", "steps"}) {
    if (!counters.contains(key)) throw core::InputError(std::string("the counters have no '") + key + "'");
  }
  fastpath::StepCounters c;
  c.t = option_value<std::vector<std::int64_t>>(counters["t"], "t");
  c.last_sync = option_value<std::vector<std::int64_t>>(counters["last_sync"], "last_sync");
  c.round = option_value<std::int64_t>(counters["round"], "round");
  c.steps = option_value<std::uint64_t>(counters["steps"], "steps");
  return c;
}

}  // namespace cgad::python
