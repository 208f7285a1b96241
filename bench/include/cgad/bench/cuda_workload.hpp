#pragma once
// The CUDA step and its device-to-device copy baseline, timed with CUDA events on one stream, with the L2
// cache flushed (a memset of twice its size) before every timed run so neither reads a warm cache.
// Without a CUDA build or device the constructor throws core::InputError with the reason.
#include "cgad/fastpath/config.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace cgad::bench {

class CudaWorkload {
 public:
  CudaWorkload(const fastpath::StepConfig& config, std::size_t n);
  ~CudaWorkload();
  CudaWorkload(const CudaWorkload&) = delete;
  CudaWorkload& operator=(const CudaWorkload&) = delete;

  // Seconds of one step / one copy of the same traffic, by CUDA events around the kernel(s) alone.
  double time_step();
  double time_copy();
  double bytes() const;
  double parameters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Why CUDA cannot be measured here, or empty when it can.
std::string cuda_unavailable_reason();

}  // namespace cgad::bench
