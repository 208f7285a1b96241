// The gate's instantiations for the hardware types (gate.hpp declares them extern), compiled here with cgad's flags
// (docs/design.md §2, "Which flags are usage requirements").
#include "cgad/core/detail/gate_impl.hpp"

namespace cgad::core {

CGAD_CORE_FOR_HARDWARE_SCALARS(CGAD_CORE_GATE_INSTANCES, )

}  // namespace cgad::core
