// Builds without the CUDA backend: --device cuda is refused with the reason.
#include "fastpath_engine.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/reference/errors.hpp"

namespace cgad::cli {

std::unique_ptr<FastpathEngine> make_cuda_engine(const fastpath::StepConfig&, FastpathParams) {
  throw reference::InputError("--device cuda: " + fastpath::cuda_unavailable_reason());
}

}  // namespace cgad::cli
