// Builds without the CUDA backend: the CUDA workload only says why it cannot run.
#include "cgad/bench/cuda_workload.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/core/errors.hpp"

namespace cgad::bench {

struct CudaWorkload::Impl {};

std::string cuda_unavailable_reason() {
  return fastpath::cuda_unavailable_reason();
}

CudaWorkload::CudaWorkload(const fastpath::StepConfig&, std::size_t) {
  throw core::InputError(cuda_unavailable_reason());
}
CudaWorkload::~CudaWorkload() = default;
double CudaWorkload::time_step() {
  return 0;
}
double CudaWorkload::time_copy() {
  return 0;
}
double CudaWorkload::bytes() const {
  return 0;
}
double CudaWorkload::parameters() const {
  return 0;
}

}  // namespace cgad::bench
