// Builds without the CUDA backend: --device cuda is refused with the reason.
#include "cgad/fastpath/engine.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/core/errors.hpp"

namespace cgad::fastpath {

std::unique_ptr<FastpathEngine> make_cuda_engine(const StepConfig&, FastpathParams) {
  throw core::InputError("--device cuda: " + cuda_unavailable_reason());
}

}  // namespace cgad::fastpath
