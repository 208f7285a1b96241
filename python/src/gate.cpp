// σ(τ) and γ(τ) in double for Python (core/gate.hpp): the arithmetic the fast path's host code evaluates the gate in
// before rounding it to float. In `cgad._cgad`, beside the optimizers (cgad.torch reads γ for its step reports); the
// same functions in MPFR are `cgad._numerics`' (numerics.cpp).
#include "bindings.hpp"
#include "gate_params.hpp"

#include "cgad/core/gate.hpp"

#include <string>

namespace py = pybind11;

namespace cgad::python {
namespace {

double gate_double(bool sigma, const std::string& tau, const std::string& alpha, const std::string& tau_cut,
                   const std::string& kind) {
  const auto gate = gate_params<double>(alpha, tau_cut, kind);
  const double t = core::parse_real<double>(tau, "tau");
  return sigma ? core::sigma(t, gate) : core::gamma(t, gate);
}

}  // namespace

void bind_gate(py::module_& m) {
  m.def(
      "sigma",
      [](const std::string& tau, const std::string& alpha, const std::string& tau_cut, const std::string& gate) {
        return gate_double(true, tau, alpha, tau_cut, gate);
      },
      py::arg("tau"), py::arg("alpha"), py::arg("tau_cut"), py::arg("gate"));
  m.def(
      "gamma",
      [](const std::string& tau, const std::string& alpha, const std::string& tau_cut, const std::string& gate) {
        return gate_double(false, tau, alpha, tau_cut, gate);
      },
      py::arg("tau"), py::arg("alpha"), py::arg("tau_cut"), py::arg("gate"));
}

}  // namespace cgad::python
