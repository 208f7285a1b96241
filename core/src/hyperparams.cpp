// The validation's instantiations for the hardware types (hyperparams.hpp declares them extern) and the bound on the
// Adam term they rest on, compiled here with cgad's flags (docs/design.md §2, "Which flags are usage requirements").
#include "cgad/core/detail/hyperparams_impl.hpp"

#include <algorithm>
#include <cmath>

namespace cgad::core {

// The bound and its proof are in hyperparams.hpp; here, how its case split is decided. The comparison β1² < β2 is
// exact: β1² = p + e exactly (p = RN(β1·β1), e = fma(β1, β1, −p)),
// and (p − β2) + e has the sign of β1² − β2 (p − β2 is exact where the two are within a factor 2, and otherwise
// exceeds |e| ≤ ulp(p)/2 by far).
double adam_term_bound(double beta1, double beta2, double eps) {
  const double by_eps = 0x1p63 / eps;
  // β1 = 0 (ρ = 0, also at β2 = 0): m̂ = g_t and v̂ ≥ (1 − β2)·g_t², so A ≤ 1/√(1 − β2), K's value there.
  if (beta1 == 0) return std::min(1 / std::sqrt(1 - beta2), by_eps);
  const double p = beta1 * beta1;
  const double excess = (p - beta2) + std::fma(beta1, beta1, -p);  // β1² − β2, its sign exact
  if (!(excess < 0)) return by_eps;
  const double k = (1 - beta1) / std::sqrt((1 - beta2) * (-excess / beta2));
  return std::min(k, by_eps);
}

CGAD_CORE_FOR_HARDWARE_SCALARS(CGAD_CORE_HYPERPARAMS_INSTANCES, )

}  // namespace cgad::core
