#pragma once
// The CUDA backend: the same optimizer as CpuOptimizer, its state in device memory, computing the same bits
// (both call block_step.hpp's per-element functions; the kernel is built with --fmad=false and IEEE division
// and sqrt, the host with -ffp-contract=off).
//
//   CudaOptimizer opt(config, n);                            // device state for n parameters
//   opt.step(params_dev, n, grad_dev, fragment_size, tau, fragment, stream);   // enqueue, returns at once
//   StepReport r = opt.report();                             // waits for the last step, tells if it applied
//
// A step is two launches on the caller's stream: a grid-wide NaN/Inf scan of the pseudo-gradient into a device
// flag, then the fused update kernel (one CUDA block per 256-element chunk: agent/step_agent.hpp loads every
// operand, 4 wide where the chunk is full and aligned, runs the per-element update and stores; CUB BlockReduce
// for a q8 moment's new absmax, then requantization), which reads the flag and leaves
// everything untouched when it is set. Nothing inside a step waits on the host. The host learns whether the
// step applied (and so whether t advances) when it next needs to: report(), or the start of the next step(),
// which waits for the previous step's flag — between steps, never inside one.
//
// Built only when CGAD_ENABLE_CUDA is on; otherwise every constructor throws InputError. Without a device,
// cuda_device_available() is false and the constructor throws InputError.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/host_state.hpp"
#include "cgad/fastpath/step_planner.hpp"

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct CUstream_st;  // cudaStream_t is CUstream_st*; nullptr is the default stream

namespace cgad::fastpath {

// True when this build has the CUDA backend and the process sees at least one CUDA device.
bool cuda_device_available();
// Why not, in one line (for test skips); empty when available.
std::string cuda_unavailable_reason();

class CudaOptimizer {
 public:
  CudaOptimizer(const StepConfig& config, std::size_t parameters);
  CudaOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes);  // as CpuOptimizer's
  ~CudaOptimizer();
  CudaOptimizer(const CudaOptimizer&) = delete;
  CudaOptimizer& operator=(const CudaOptimizer&) = delete;

  // `params` (the whole vector) and `grad` (the fragment's slice) are device pointers.
  void step(float* params, std::size_t params_size, const float* grad, std::size_t grad_size, std::int64_t tau,
            std::size_t fragment, CUstream_st* stream);
  void step(bf16* params, std::size_t params_size, const float* grad, std::size_t grad_size, std::int64_t tau,
            std::size_t fragment, CUstream_st* stream);
  // Waits for the last step enqueued and returns its report.
  StepReport report();
  void advance_round();

  const StepConfig& config() const;
  std::size_t parameters() const;
  std::vector<reference::StateCounter> counters();
  // Copies the device state to the host (waits for the last step).
  HostState download();
  std::vector<std::string> buffer_names() const;  // as CpuOptimizer's
  // As CpuOptimizer::read_buffer: the named buffer ("m", "v" or "b"), dequantized, into host memory.
  void read_buffer(std::string_view name, std::span<float> out);
  // The same file format as CpuOptimizer's (state_file.hpp): a state saved by either backend loads into the
  // other. load() refuses a bad file with InputError and leaves the device state untouched.
  void save(const std::filesystem::path& path);
  void load(const std::filesystem::path& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgad::fastpath
