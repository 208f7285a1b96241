// The optimizer and fast-path options (core/optimizer_options.hpp, fastpath/options.hpp) from a Python dict, once
// for every entry point that takes them (cgad.replay, cgad.noise, cgad.torch's step_config): a key that is absent
// keeps the command's default.
#include "bindings.hpp"

#include <pybind11/stl.h>

#include <cmath>
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

namespace {

// The q8 maps' codes from a pair (signed, unsigned) of sequences of 256 floats (cgad.torch passes each map's float32
// values as Python floats, which hold them exactly); validate() checks what the codes are.
fastpath::Q8Codes q8_codes(const py::handle& value) {
  const auto refuse = [] {
    throw core::InputError("q8_codes must be a pair (signed, unsigned) of sequences of 256 float32 values");
  };
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value) || py::len(value) != 2) refuse();
  fastpath::Q8Codes out;
  const py::sequence pair = py::reinterpret_borrow<py::sequence>(value);
  for (int m = 0; m < 2; ++m) {
    const py::handle codes = pair[static_cast<std::size_t>(m)];
    if (!py::isinstance<py::sequence>(codes) || py::len(codes) != fastpath::kQ8MapCodes) refuse();
    auto& into = m == 0 ? out.signed_codes : out.unsigned_codes;
    const py::sequence values = py::reinterpret_borrow<py::sequence>(codes);
    for (std::size_t k = 0; k < fastpath::kQ8MapCodes; ++k) {
      const double x = option_value<double>(values[k], "a q8 code");
      into[k] = static_cast<float>(x);
      if (static_cast<double>(into[k]) != x && !std::isnan(x)) refuse();  // not a float32 value
    }
  }
  return out;
}

}  // namespace

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
  if (o.contains("q8_codes") && !o["q8_codes"].is_none()) out.q8_codes = q8_codes(o["q8_codes"]);
  return out;
}

}  // namespace cgad::python
