// The gate and the bound constants for Python, from the libraries `cgad gate` and `cgad bound` call
// (core/gate.hpp, theory/constants.hpp): σ(τ) and γ(τ) in MPFR as exact decimal text (in double they are
// `cgad._cgad`'s, gate.cpp); B1, B2 and W as MPFR values and certified MPFI enclosures with the verdict of every
// inequality. In `cgad._numerics`, the module that links MPFR, GMP and MPFI.
//
// MPFR's precision is process-wide (reference/real.hpp): each exact call sets it, computes, and converts every
// result to text before it returns, so that no MPFR value outlives the precision it was made at. They hold the
// GIL throughout, so two Python threads never change it under each other.
#include "gate_params.hpp"
#include "numerics_bindings.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/reference/real.hpp"
#include "cgad/theory/constants.hpp"

#include <pybind11/stl.h>

#include <optional>
#include <string>

namespace py = pybind11;

namespace cgad::python {
namespace {

using reference::mpfr_real;

// The largest precision asked of the exact functions: the certified sup bisects down to the working precision,
// so the bound constants cost about p^2.5 (0.3 s at 1024 bits, 5 s at 4096 on the development machine).
constexpr unsigned kMaxExactPrecisionBits = 4096;

unsigned set_precision(unsigned bits) {
  if (bits < reference::kMinPrecisionBits || bits > kMaxExactPrecisionBits) {
    throw core::InputError("precision must be in [" + std::to_string(reference::kMinPrecisionBits) + ", " +
                           std::to_string(kMaxExactPrecisionBits) + "] bits, got " + std::to_string(bits));
  }
  return reference::set_working_precision_bits(bits);
}

// `digits` significant digits of an MPFR value, as core::to_decimal prints them (and Interval::lower_string,
// which test_numerics.py compares with `cgad gate` / `cgad bound`). Asked for 0, Boost prints every digit, and 1
// significant digit is too few to read anything from, so both are refused.
std::string significant(const mpfr_real& x, unsigned digits) {
  if (digits < 2) throw core::InputError("digits must be >= 2, got " + std::to_string(digits));
  return core::to_decimal(x, digits);
}

// σ or γ in MPFR at `precision` bits, as decimal text (`digits` significant digits, or enough to read the MPFR
// value back), with the effective precision.
py::dict gate_exact(bool sigma, const std::string& tau, const std::string& alpha, const std::string& tau_cut,
                    const std::string& kind, unsigned precision, std::optional<unsigned> digits) {
  const unsigned bits = set_precision(precision);
  const auto gate = gate_params<mpfr_real>(alpha, tau_cut, kind);
  const mpfr_real t = core::parse_real<mpfr_real>(tau, "tau");
  const mpfr_real value = sigma ? core::sigma(t, gate) : core::gamma(t, gate);
  py::dict out;
  out["value"] = digits ? significant(value, *digits) : core::to_decimal(value);
  out["float"] = value.convert_to<double>();
  out["precision_bits"] = bits;
  return out;
}

py::dict enclosure(const theory::Interval& x, unsigned digits) {
  py::dict d;
  d["lo"] = x.lower_string(digits);
  d["hi"] = x.upper_string(digits);
  d["float"] = x.midpoint().convert_to<double>();
  return d;
}

py::dict sup_constant(const theory::SupConstant& c, unsigned digits) {
  py::dict d;
  d["value"] = significant(c.value_mpfr, digits);
  d["float"] = c.value_mpfr.convert_to<double>();
  d["enclosure"] = enclosure(c.value, digits);
  d["argmax"] = significant(c.argmax_mpfr, digits);
  d["argmax_enclosure"] = enclosure(c.argmax, digits);
  d["integer_value_enclosure"] = enclosure(c.integer_value, digits);
  d["integer_argmax"] = c.integer_argmax;
  d["integer_argmax_certified"] = c.integer_argmax_certified;
  d["cutoff_bound_enclosure"] = enclosure(c.cutoff_bound, digits);
  return d;
}

py::dict bound_constants(const std::string& alpha, long tau_cut, unsigned precision, std::optional<unsigned> digits) {
  const unsigned bits = set_precision(precision);
  const theory::BoundConstants c = theory::compute_bound_constants(alpha, tau_cut);
  // Enough digits to read the working-precision value back, unless asked for fewer; enclosures are printed
  // rounded outward, so at any digit count they still contain the constant.
  const unsigned n = digits.value_or(1 + static_cast<unsigned>(bits * 0.30102999566398120));
  py::dict out;
  out["alpha"] = c.alpha_text;
  out["tau_cut"] = c.tau_cut;
  out["precision_bits"] = c.precision_bits;
  out["B1"] = sup_constant(c.b1, n);
  out["B2"] = sup_constant(c.b2, n);
  py::dict w;
  w["value"] = significant(c.w_mpfr, n);
  w["float"] = c.w_mpfr.convert_to<double>();
  w["enclosure"] = enclosure(c.w, n);
  w["cutoff_bound_enclosure"] = enclosure(c.w_cutoff_bound, n);
  out["W"] = w;
  py::list inequalities;
  for (const auto& q : c.inequalities) {
    py::dict d;
    d["statement"] = q.statement;
    d["lhs_enclosure"] = enclosure(q.constant, n);
    d["rhs_enclosure"] = enclosure(q.comparison, n);
    d["verdict"] = std::string(theory::to_string(q.verdict));
    d["proved"] = q.verdict == theory::Verdict::proved || q.verdict == theory::Verdict::proved_vacuous;
    inequalities.append(d);
  }
  out["inequalities"] = inequalities;
  out["cutoff_past_peak"] = c.cutoff_past_peak;
  return out;
}

}  // namespace

void bind_numerics(py::module_& m) {
  m.def(
      "sigma_exact",
      [](const std::string& tau, const std::string& alpha, const std::string& tau_cut, const std::string& gate,
         unsigned precision,
         std::optional<unsigned> digits) { return gate_exact(true, tau, alpha, tau_cut, gate, precision, digits); },
      py::arg("tau"), py::arg("alpha"), py::arg("tau_cut"), py::arg("gate"), py::arg("precision"), py::arg("digits"));
  m.def(
      "gamma_exact",
      [](const std::string& tau, const std::string& alpha, const std::string& tau_cut, const std::string& gate,
         unsigned precision,
         std::optional<unsigned> digits) { return gate_exact(false, tau, alpha, tau_cut, gate, precision, digits); },
      py::arg("tau"), py::arg("alpha"), py::arg("tau_cut"), py::arg("gate"), py::arg("precision"), py::arg("digits"));
  m.def("bound_constants", &bound_constants, py::arg("alpha"), py::arg("tau_cut"), py::arg("precision"),
        py::arg("digits"));
  m.def("default_precision_bits", [] { return reference::kDefaultPrecisionBits; });
}

}  // namespace cgad::python
