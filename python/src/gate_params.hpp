#pragma once
// The gate a Python caller names ("cosine", "exponential", "none", with α and τ_cut as decimal text), validated, in
// any scalar type: double for `cgad._cgad`'s sigma and gamma (gate.cpp), MPFR for `cgad._numerics`' exact ones
// (numerics.cpp).
#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/core/real_scalar.hpp"

#include <string>

namespace cgad::python {

inline core::GateKind gate_kind(const std::string& name) {
  if (name == "cosine") return core::GateKind::cosine;
  if (name == "exponential") return core::GateKind::exponential;
  if (name == "none") return core::GateKind::none;
  throw core::InputError("unknown gate '" + name + "' (expected cosine, exponential or none)");
}

template <core::RealScalar Real>
core::GateParams<Real> gate_params(const std::string& alpha, const std::string& tau_cut, const std::string& kind) {
  core::GateParams<Real> gate{gate_kind(kind), core::parse_real<Real>(alpha, "alpha"),
                              core::parse_real<Real>(tau_cut, "tau_cut")};
  core::validate(gate);
  return gate;
}

}  // namespace cgad::python
