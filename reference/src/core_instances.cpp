// Core's gate and validation (core/detail/gate_impl.hpp, core/detail/hyperparams_impl.hpp) instantiated for the
// reference's mpfr_real, which reference/real.hpp declares extern; the hardware types' are in core/src.
#include "cgad/core/detail/gate_impl.hpp"
#include "cgad/core/detail/hyperparams_impl.hpp"
#include "cgad/reference/real.hpp"

namespace cgad::core {

CGAD_CORE_GATE_INSTANCES(, reference::mpfr_real)
CGAD_CORE_HYPERPARAMS_INSTANCES(, reference::mpfr_real)

}  // namespace cgad::core
