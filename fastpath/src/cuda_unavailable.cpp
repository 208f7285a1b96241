// The CUDA backend's entry points in a build without CUDA (CGAD_ENABLE_CUDA off): nothing is available, and
// constructing a CudaOptimizer, a CudaTableStepper or a CudaEventVeto is refused with one line (the same InputError),
// so no method can be reached.
#include "cgad/fastpath/cuda_optimizer.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/host_state.hpp"

#include <stdexcept>

namespace cgad::fastpath {

bool cuda_device_available() {
  return false;
}
std::string cuda_unavailable_reason() {
  return "this build has no CUDA backend (CGAD_ENABLE_CUDA off; for a pip install, CGAD_CUDA=off, or auto without a "
         "CUDA torch in the build: docs/gpu.md)";
}

struct CudaOptimizer::Impl {};
struct CudaTableStepper::Impl {};
struct CudaEventVeto::Impl {};

namespace {
[[noreturn]] void refuse() {
  throw core::InputError("the CUDA backend is unavailable: " + cuda_unavailable_reason());
}
}  // namespace

CudaEventVeto::CudaEventVeto(CUstream_st*) {
  refuse();
}
CudaEventVeto::~CudaEventVeto() = default;

CudaOptimizer::CudaOptimizer(const StepConfig&, std::size_t, CUstream_st*) {
  refuse();
}
CudaOptimizer::CudaOptimizer(const StepConfig&, std::vector<std::size_t>, CUstream_st*) {
  refuse();
}
CudaOptimizer::~CudaOptimizer() = default;
CudaTableStepper::CudaTableStepper(const StepConfig&, std::vector<std::size_t>, CUstream_st*) {
  refuse();
}
CudaTableStepper::~CudaTableStepper() = default;

// Unreachable: no CudaOptimizer, CudaTableStepper or CudaEventVeto can exist in this build.
namespace {
[[noreturn]] void unreachable() {
  throw std::logic_error("CudaOptimizer without a CUDA backend");
}
}  // namespace
void CudaEventVeto::reset(CUstream_st*) {
  unreachable();
}
void CudaEventVeto::finish(CUstream_st*) {
  unreachable();
}
unsigned* CudaEventVeto::device_word() const {
  unreachable();
}
std::uint64_t CudaOptimizer::step(float*, std::size_t, const float*, std::size_t, std::int64_t, std::size_t,
                                  CUstream_st*) {
  unreachable();
}
std::uint64_t CudaOptimizer::step(bf16*, std::size_t, const float*, std::size_t, std::int64_t, std::size_t,
                                  CUstream_st*) {
  unreachable();
}
std::uint64_t CudaOptimizer::step(std::span<float* const>, std::span<const float* const>, std::int64_t, std::size_t,
                                  CUstream_st*) {
  unreachable();
}
std::uint64_t CudaOptimizer::step(std::span<bf16* const>, std::span<const float* const>, std::int64_t, std::size_t,
                                  CUstream_st*) {
  unreachable();
}
void CudaOptimizer::preview(std::span<const float* const>, std::int64_t, std::size_t, CudaEventVeto*, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaOptimizer::step_previewed(std::span<float* const>, std::span<const float* const>,
                                            const CudaEventVeto*, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaOptimizer::step_previewed(std::span<bf16* const>, std::span<const float* const>, const CudaEventVeto*,
                                            CUstream_st*) {
  unreachable();
}
CudaStepReport CudaOptimizer::report(std::uint64_t, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaOptimizer::last_ticket() const {
  unreachable();
}
std::vector<unsigned char> CudaOptimizer::save_bytes(CUstream_st*) {
  unreachable();
}
void CudaOptimizer::load_bytes(std::span<const unsigned char>, CUstream_st*) {
  unreachable();
}
void CudaOptimizer::set_hyperparameters(const StepConfig&, CUstream_st*) {
  unreachable();
}
StepReport CudaOptimizer::report(CUstream_st*) {
  unreachable();
}
void CudaOptimizer::advance_round(CUstream_st*) {
  unreachable();
}
const StepConfig& CudaOptimizer::config() const {
  unreachable();
}
std::size_t CudaOptimizer::parameters() const {
  unreachable();
}
std::vector<core::StateCounter> CudaOptimizer::counters(CUstream_st*) {
  unreachable();
}
HostState CudaOptimizer::download(CUstream_st*) {
  unreachable();
}
std::vector<std::string> CudaOptimizer::buffer_names() const {
  unreachable();
}
void CudaOptimizer::read_buffer(std::string_view, std::span<float>, CUstream_st*) {
  unreachable();
}
void CudaOptimizer::save(const std::filesystem::path&, CUstream_st*) {
  unreachable();
}
void CudaOptimizer::load(const std::filesystem::path&, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaTableStepper::step(std::span<float* const>, std::span<const float* const>,
                                     std::span<const TensorState>, std::int64_t, std::size_t, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaTableStepper::step(std::span<bf16* const>, std::span<const float* const>,
                                     std::span<const TensorState>, std::int64_t, std::size_t, CUstream_st*) {
  unreachable();
}
void CudaTableStepper::preview(std::span<const float* const>, std::int64_t, std::size_t, CudaEventVeto*, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaTableStepper::step_previewed(std::span<float* const>, std::span<const float* const>,
                                               std::span<const TensorState>, const CudaEventVeto*, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaTableStepper::step_previewed(std::span<bf16* const>, std::span<const float* const>,
                                               std::span<const TensorState>, const CudaEventVeto*, CUstream_st*) {
  unreachable();
}
StepReport CudaTableStepper::report(CUstream_st*) {
  unreachable();
}
CudaStepReport CudaTableStepper::report(std::uint64_t, CUstream_st*) {
  unreachable();
}
std::uint64_t CudaTableStepper::last_ticket() const {
  unreachable();
}
void CudaTableStepper::advance_round(CUstream_st*) {
  unreachable();
}
TensorStateShape CudaTableStepper::shape(std::size_t) const {
  unreachable();
}
TensorState CudaTableStepper::entry(std::size_t, std::span<void* const>) const {
  unreachable();
}
const StepConfig& CudaTableStepper::config() const {
  unreachable();
}
std::size_t CudaTableStepper::parameters() const {
  unreachable();
}
const std::vector<std::size_t>& CudaTableStepper::tensor_sizes() const {
  unreachable();
}
std::vector<core::StateCounter> CudaTableStepper::counters(CUstream_st*) {
  unreachable();
}
StepCounters CudaTableStepper::raw_counters(CUstream_st*) {
  unreachable();
}
void CudaTableStepper::set_raw_counters(StepCounters, CUstream_st*) {
  unreachable();
}
void CudaTableStepper::set_hyperparameters(const StepConfig&, CUstream_st*) {
  unreachable();
}

}  // namespace cgad::fastpath
