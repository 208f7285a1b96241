// A fast-path configuration from a cgad.torch optimizer's options, through the same code that turns `cgad replay`'s
// flags into one (fastpath/options.hpp over core/optimizer_options.hpp): the hyperparameters' ranges
// (core::validate_range), tau_cut's limit, on_zero_gate, the formats and fastpath::validate. The Python side
// passes every number as text -- the shortest decimal of the Python float (repr) -- which is rounded here once,
// correctly, to float, the format the step runs in: lr=1e-3 reaches the fast path as the float nearest to 0.001,
// exactly as `cgad replay --lr 1e-3` does, rather than as the double nearest to it rounded again. alpha and tau_cut
// are rounded to double instead, from which the fast path computes σ (fastpath/detail/staleness.hpp).
#include "bindings.hpp"

#include "cgad/fastpath/detail/step_planner.hpp"
#include "cgad/fastpath/options.hpp"
#include "cgad/core/errors.hpp"

#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace cgad::python {
namespace {

const std::set<std::string> kKeys{"optimizer",    "lr",       "beta1",       "beta2",    "eps",
                                  "weight_decay", "momentum", "alpha",       "tau_cut",  "on_zero_gate",
                                  "fragments",    "params",   "state",       "rounding", "seed",
                                  "q8_semantics", "v_map",    "min_q8_size", "q8_codes"};

}  // namespace

fastpath::StepConfig step_config(const py::dict& spec) {
  for (const auto& item : spec) {
    const std::string key = option_value<std::string>(item.first, "an optimizer option's name");
    if (!kKeys.contains(key)) throw core::InputError("unknown optimizer option '" + key + "'");
  }
  return fastpath::step_config(optimizer_options(spec), fastpath_options(spec));
}

py::dict report_dict(const fastpath::StepReport& r) {
  py::dict d;
  d["applied"] = r.applied;
  d["reason"] = std::string(core::to_string(r.reason));
  d["nonfinite_index"] = r.nonfinite_index;
  d["tau_effective"] = r.tau_effective;
  d["sigma"] = static_cast<double>(r.sigma);
  d["invalid_state"] = r.invalid_state;  // elements left as they were: their state was invalid (block_step.hpp)
  return d;
}

void bind_step_config(py::module_& m) {
  m.def(
      "check_spec", [](const py::dict& spec) { step_config(spec); }, py::arg("spec"),
      "refuses (InputError) what step_config refuses, builds nothing");
  // PA-CGAD's fragments over a layout, as the fast path cuts the concatenated tensors: (offset, size) each.
  m.def(
      "fragment_bounds",
      [](const py::dict& spec, std::vector<std::size_t> tensor_sizes) {
        const fastpath::StepPlanner planner(step_config(spec), std::move(tensor_sizes));
        std::vector<std::pair<std::size_t, std::size_t>> out;
        for (std::size_t f = 0; f < planner.config().fragments; ++f) {
          out.emplace_back(planner.fragment_size(f) == 0 ? 0 : planner.layout().offset(f), planner.fragment_size(f));
        }
        return out;
      },
      py::arg("spec"), py::arg("tensor_sizes"));
}

}  // namespace cgad::python
