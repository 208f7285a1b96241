#pragma once
// One fast-path optimizer with its parameters, on the CPU or a CUDA device, behind one interface, so that
// `cgad replay` runs the same loop for both and reads results back to the host after every event.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/config.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cgad::fastpath {

// The parameters in their stored format: exactly one of the two vectors is used.
struct FastpathParams {
  std::vector<float> fp32;
  std::vector<fastpath::bf16> bf16;  // qualified: the member is named after its type
  std::vector<std::size_t> tensors;  // the parameters' tensor sizes (q8 blocks restart at each); empty: one tensor
  std::size_t size() const { return fp32.empty() ? bf16.size() : fp32.size(); }
  std::vector<std::size_t> tensor_sizes() const { return tensors.empty() ? std::vector<std::size_t>{size()} : tensors; }
};

class FastpathEngine {
 public:
  virtual ~FastpathEngine() = default;
  virtual StepReport step(std::span<const float> grad, std::int64_t tau, std::size_t fragment) = 0;
  virtual void advance_round() = 0;
  // The parameters after the last step, on the host.
  virtual const FastpathParams& params() = 0;
  virtual std::vector<std::string> buffer_names() const = 0;
  // The named state buffer, dequantized to float, into `out` (one element per parameter).
  virtual void read_buffer(const std::string& name, std::span<float> out) = 0;
  virtual std::vector<core::StateCounter> counters() = 0;
};

// `device` is "cpu" or "cuda"; InputError for anything else, or for "cuda" without a device.
std::unique_ptr<FastpathEngine> make_fastpath_engine(const std::string& device, const StepConfig& config,
                                                     FastpathParams params);
// Defined in fastpath_engine_cuda.cpp (CUDA builds) or fastpath_engine_no_cuda.cpp.
std::unique_ptr<FastpathEngine> make_cuda_engine(const StepConfig& config, FastpathParams params);

}  // namespace cgad::fastpath
