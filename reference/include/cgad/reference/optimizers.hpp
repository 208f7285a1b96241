#pragma once
// Any of the seven outer optimizers, built from one configuration (core/optimizer_config.hpp). The optimizers
// themselves (detail/gated_adam.hpp, detail/nesterov.hpp, detail/delayed_nesterov.hpp) are the reference library's:
// make_optimizer is compiled there for float, double and mpfr_real, the types cgad runs them in, and is declared
// `extern` here for each, so that no user's translation unit compiles their arithmetic under its own flags
// (docs/design.md §2, "Which flags are usage requirements"). Another scalar type does not link.
#include "cgad/core/optimizer_config.hpp"
#include "cgad/reference/outer_optimizer.hpp"
#include "cgad/reference/real.hpp"

#include <cstddef>
#include <memory>

namespace cgad::reference {

// InputError for fragments on an optimizer other than PA-CGAD, invalid hyperparameters or gate, P > τ_cut (PA-CGAD)
// or a Delayed Nesterov buffer N < 1.
template <core::RealScalar Real>
std::unique_ptr<OuterOptimizer<Real>> make_optimizer(const core::OptimizerConfig<Real>& config, std::size_t parameters);

// make_optimizer for one scalar type, as an explicit instantiation: `extern` here, defined in
// reference/src/optimizers.cpp.
#define CGAD_REFERENCE_OPTIMIZER_INSTANCES(EXTERN, Real)                                                         \
  EXTERN template std::unique_ptr<OuterOptimizer<Real>> make_optimizer<Real>(const core::OptimizerConfig<Real>&, \
                                                                             std::size_t);
CGAD_REFERENCE_OPTIMIZER_INSTANCES(extern, float)
CGAD_REFERENCE_OPTIMIZER_INSTANCES(extern, double)
CGAD_REFERENCE_OPTIMIZER_INSTANCES(extern, mpfr_real)

}  // namespace cgad::reference
