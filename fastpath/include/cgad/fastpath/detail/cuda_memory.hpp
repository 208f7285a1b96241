#pragma once
// CUDA runtime calls checked, and device memory owned, once for every CUDA user in cgad (the optimizer, the replay
// engine, the benchmark). Host code only; include it only where CGAD_FASTPATH_HAS_CUDA is defined.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cgad::fastpath::detail {

// A failed CUDA call is not the user's input: std::runtime_error, which the CLI reports as an internal failure.
inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(status));
}

// `size` elements of T in device memory (none for size 0), freed with the buffer.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t size = 0) : size_(size) {
    if (size != 0) check(cudaMalloc(reinterpret_cast<void**>(&data_), size * sizeof(T)), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    if (host.size() != size_) throw std::logic_error("DeviceBuffer::upload: size mismatch");
    if (size_ != 0) check(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    if (size_ != 0) check(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "download");
    return host;
  }
  // Ordered on `stream`, for callers that check the status themselves. From pageable memory the copy has taken
  // the host bytes when it returns (the driver stages them), so `host` may go at once.
  cudaError_t upload_async(const std::vector<T>& host, cudaStream_t stream) {
    if (host.size() != size_) throw std::logic_error("DeviceBuffer::upload_async: size mismatch");
    return size_ == 0 ? cudaSuccess : cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, stream);
  }
  // Into `host` (resized), ordered on `stream`; the bytes are there once `stream` is synchronized.
  cudaError_t download_async(std::vector<T>& host, cudaStream_t stream) const {
    host.resize(size_);
    return size_ == 0 ? cudaSuccess : cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cgad::fastpath::detail
