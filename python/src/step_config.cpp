// A fast-path configuration from a cgad.torch optimizer's options. The Python side passes every number as text
// -- the shortest decimal of the Python float (repr) -- and it is rounded here once, correctly, to float, the
// format the step runs in: lr=1e-3 reaches the fast path as the float nearest to 0.001, exactly as
// `cgad replay --lr 1e-3` does, rather than as the double nearest to it rounded again.
//
// The ranges are those the command line enforces on a user's hyperparameters (reference::validate_range: finite
// input stays finite), then fastpath::validate (formats, gate, fragments, bnb's limits).
#include "bindings.hpp"

#include "cgad/fastpath/step_planner.hpp"
#include "cgad/reference/errors.hpp"
#include "cgad/reference/hyperparams.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/reference/real.hpp"

#include <pybind11/stl.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace cgad::python {
namespace {

// The largest tau_cut: 2^24, the largest integer up to which the fast path's float tau_cut holds every integer
// exactly (past it the gate would cut at another integer than the one asked for).
constexpr std::int64_t kMaxTauCut = std::int64_t{1} << 24;

const std::set<std::string> kKeys{"optimizer", "lr", "beta1", "beta2", "eps", "weight_decay", "momentum",
                                  "alpha", "tau_cut", "on_zero_gate", "fragments", "params", "state",
                                  "rounding", "seed", "q8_semantics", "min_q8_size"};

float number(const py::dict& spec, const char* key, float fallback) {
  if (!spec.contains(key)) return fallback;
  return reference::parse_real<float>(py::cast<std::string>(spec[key]), key);
}

}  // namespace

fastpath::StepConfig step_config(const py::dict& spec) {
  for (const auto& item : spec) {
    const std::string key = py::cast<std::string>(item.first);
    if (!kKeys.contains(key)) throw reference::InputError("unknown optimizer option '" + key + "'");
  }
  fastpath::StepConfig c;
  c.optimizer = reference::parse_optimizer(py::cast<std::string>(spec["optimizer"]));
  c.adam.lr = number(spec, "lr", c.adam.lr);
  c.adam.beta1 = number(spec, "beta1", c.adam.beta1);
  c.adam.beta2 = number(spec, "beta2", c.adam.beta2);
  c.adam.eps = number(spec, "eps", c.adam.eps);
  c.adam.weight_decay = number(spec, "weight_decay", c.adam.weight_decay);
  c.nesterov.lr = number(spec, "lr", c.nesterov.lr);
  c.nesterov.momentum = number(spec, "momentum", c.nesterov.momentum);
  c.alpha = number(spec, "alpha", c.alpha);
  if (spec.contains("tau_cut")) {
    const auto tau_cut = py::cast<std::int64_t>(spec["tau_cut"]);
    if (tau_cut < 1 || tau_cut > kMaxTauCut) {
      throw reference::InputError("tau_cut must be an integer in [1, 2^24 = 16777216] (the largest the fast path's "
                                  "float holds exactly), got " + std::to_string(tau_cut));
    }
    c.tau_cut = static_cast<float>(tau_cut);
  }
  if (spec.contains("on_zero_gate")) {
    const auto policy = py::cast<std::string>(spec["on_zero_gate"]);
    if (policy != "apply" && policy != "skip") {
      throw reference::InputError("on_zero_gate must be 'apply' or 'skip', got '" + policy + "'");
    }
    c.on_zero_gate = policy == "apply" ? reference::ZeroGatePolicy::apply : reference::ZeroGatePolicy::skip;
  }
  if (spec.contains("fragments")) c.fragments = py::cast<std::size_t>(spec["fragments"]);
  if (spec.contains("params")) c.params = fastpath::parse_param_format(py::cast<std::string>(spec["params"]));
  if (spec.contains("state")) c.state = fastpath::parse_state_format(py::cast<std::string>(spec["state"]));
  if (spec.contains("rounding")) c.rounding = fastpath::parse_rounding(py::cast<std::string>(spec["rounding"]));
  if (spec.contains("seed")) c.seed = py::cast<std::uint64_t>(spec["seed"]);
  if (spec.contains("q8_semantics")) {
    c.q8_semantics = fastpath::parse_q8_semantics(py::cast<std::string>(spec["q8_semantics"]));
  }
  if (spec.contains("min_q8_size") && !spec["min_q8_size"].is_none()) {
    c.min_q8_size = py::cast<std::size_t>(spec["min_q8_size"]);
  }
  if (reference::is_adam_family(c.optimizer)) {
    reference::validate_range(c.adam);
  } else {
    reference::validate_range(c.nesterov);
  }
  fastpath::validate(c);
  return c;
}

py::dict report_dict(const fastpath::StepReport& r) {
  py::dict d;
  d["applied"] = r.applied;
  d["reason"] = std::string(reference::to_string(r.reason));
  d["nonfinite_index"] = r.nonfinite_index;
  d["tau_effective"] = r.tau_effective;
  d["sigma"] = static_cast<double>(r.sigma);
  return d;
}

void bind_step_config(py::module_& m) {
  m.def("check_spec", [](const py::dict& spec) { step_config(spec); }, py::arg("spec"),
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
