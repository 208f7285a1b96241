// The optimizer and fast-path options (core/optimizer_options.hpp, fastpath/options.hpp) from a Python dict, once
// for every entry point that takes them (cgad.replay, cgad.noise, cgad.torch's step_config): a key that is absent
// keeps the command's default.
#include "bindings.hpp"

#include <pybind11/stl.h>

#include <optional>
#include <string>

namespace py = pybind11;

namespace cgad::python {
core::OptimizerOptions optimizer_options(const py::dict& o) {
  core::OptimizerOptions out;
  take(o, "optimizer", out.optimizer);
  take(o, "lr", out.lr);
  take(o, "beta1", out.beta1);
  take(o, "beta2", out.beta2);
  take(o, "eps", out.eps);
  take(o, "weight_decay", out.weight_decay);
  take(o, "momentum", out.momentum);
  take(o, "alpha", out.alpha);
  take(o, "tau_cut", out.tau_cut);
  take(o, "buffer", out.buffer);
  take(o, "fragments", out.fragments);
  take(o, "on_zero_gate", out.on_zero_gate);
  return out;
}

fastpath::FastpathOptions fastpath_options(const py::dict& o) {
  fastpath::FastpathOptions out;
  take(o, "params", out.params);
  take(o, "state", out.state);
  take(o, "rounding", out.rounding);
  take(o, "seed", out.seed);
  take(o, "device", out.device);
  take(o, "q8_semantics", out.q8_semantics);
  take(o, "v_map", out.v_map);
  take(o, "min_q8_size", out.min_q8_size);
  return out;
}

}  // namespace cgad::python
