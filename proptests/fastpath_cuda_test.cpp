// CUDA backend against the CPU backend: the same bits for every optimizer, format and rounding, over sizes
// around the block, with a NaN event and a zero-gate event in the stream. Skips, saying why, where this
// process sees no CUDA device (or the build has no CUDA backend).
#include "fastpath_test_support.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#if defined(CGAD_FASTPATH_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace cgad::fastpath {
namespace {

using testing::all_format_configs;
using testing::describe;
using testing::Params;
using testing::random_vector;

TEST(FastpathCuda, ConstructionIsRefusedWithoutADevice) {
  if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(CudaOptimizer(StepConfig{}, 10), reference::InputError);
}

#if defined(CGAD_FASTPATH_HAS_CUDA)

template <class T>
T* to_device(const std::vector<T>& host) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), std::max<std::size_t>(1, host.size()) * sizeof(T)),
            cudaSuccess);
  if (!host.empty()) cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return device;
}
template <class T>
std::vector<T> to_host(const T* device, std::size_t n) {
  std::vector<T> host(n);
  if (n != 0) cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

std::vector<unsigned char> host_state_bytes(const HostState& s) {
  std::vector<unsigned char> out;
  const auto append = [&out](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    out.insert(out.end(), b, b + n);
  };
  for (int k = 0; k < s.moments; ++k) {
    append(s.fp32[k].data(), s.fp32[k].size() * 4);
    append(s.half[k].data(), s.half[k].size() * 2);
    append(s.codes[k].data(), s.codes[k].size());
    append(s.absmax[k].data(), s.absmax[k].size() * 4);
  }
  return out;
}

TEST(FastpathCuda, BitIdenticalToTheCpuBackend) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA-vs-CPU bit identity not checked: " << cuda_unavailable_reason();
  for (const auto kind : {reference::OptimizerKind::cgad, reference::OptimizerKind::adam_decay,
                          reference::OptimizerKind::adam, reference::OptimizerKind::nesterov,
                          reference::OptimizerKind::sdm}) {
    for (StepConfig config : all_format_configs(kind)) {
      config.on_zero_gate = reference::ZeroGatePolicy::skip;
      for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{256},
                                  std::size_t{257}, std::size_t{5000}}) {
        CpuOptimizer cpu(config, n, 2);
        CudaOptimizer gpu(config, n);
        Params params(config, random_vector(n, 21));
        void* device_params = config.params == ParamFormat::fp32 ? static_cast<void*>(to_device(params.fp32))
                                                                 : static_cast<void*>(to_device(params.half));
        const std::int64_t taus[] = {0, 3, 40, 1, 7};
        for (int e = 0; e < 5; ++e) {
          auto grad = random_vector(n, 30 + static_cast<std::uint32_t>(e));
          if (e == 3 && n > 0) grad[n / 2] = std::numeric_limits<float>::quiet_NaN();
          float* device_grad = to_device(grad);
          const StepReport want = params.step(cpu, grad, taus[e]);
          if (config.params == ParamFormat::fp32) {
            gpu.step(static_cast<float*>(device_params), n, device_grad, n, taus[e], 0, nullptr);
          } else {
            gpu.step(static_cast<bf16*>(device_params), n, device_grad, n, taus[e], 0, nullptr);
          }
          const StepReport got = gpu.report();
          EXPECT_EQ(got.applied, want.applied) << describe(config) << " n=" << n << " event " << e;
          EXPECT_EQ(got.reason, want.reason) << describe(config) << " n=" << n << " event " << e;
          cudaFree(device_grad);
        }
        Params back = params;
        if (config.params == ParamFormat::fp32) {
          back.fp32 = to_host(static_cast<float*>(device_params), n);
        } else {
          back.half = to_host(static_cast<bf16*>(device_params), n);
        }
        cudaFree(device_params);
        ASSERT_EQ(back.bytes(), params.bytes()) << describe(config) << " n=" << n << ": parameters differ";
        ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(cpu.state()))
            << describe(config) << " n=" << n << ": state differs";
        EXPECT_EQ(gpu.counters().size(), cpu.counters().size());
      }
    }
  }
}

struct Event {
  std::size_t fragment;
  std::int64_t tau;
};

// Runs `events` (a round advancing after each) through the CPU backend and, on `stream`, the CUDA backend, over one
// parameter vector cut into `tensors`: the same reports, parameter bits, state bytes and counters.
void expect_same_as_cpu(const StepConfig& config, const std::vector<std::size_t>& tensors,
                        const std::vector<Event>& events, cudaStream_t stream, const std::string& what) {
  CpuOptimizer cpu(config, tensors, 4);
  CudaOptimizer gpu(config, tensors);
  const std::size_t n = cpu.parameters();
  Params params(config, random_vector(n, 21));
  void* device_params = config.params == ParamFormat::fp32 ? static_cast<void*>(to_device(params.fp32))
                                                           : static_cast<void*>(to_device(params.half));
  for (std::size_t e = 0; e < events.size(); ++e) {
    const Event& event = events[e];
    const auto grad = random_vector(cpu.planner().fragment_size(event.fragment), 30 + static_cast<std::uint32_t>(e));
    float* device_grad = to_device(grad);
    const StepReport want = params.step(cpu, grad, event.tau, event.fragment);
    if (config.params == ParamFormat::fp32) {
      gpu.step(static_cast<float*>(device_params), n, device_grad, grad.size(), event.tau, event.fragment, stream);
    } else {
      gpu.step(static_cast<bf16*>(device_params), n, device_grad, grad.size(), event.tau, event.fragment, stream);
    }
    const StepReport got = gpu.report();  // waits for the step, so the gradient can be freed
    EXPECT_EQ(got.applied, want.applied) << what << " event " << e;
    EXPECT_EQ(got.reason, want.reason) << what << " event " << e;
    cudaFree(device_grad);
    cpu.advance_round();
    gpu.advance_round();
  }
  Params back = params;
  if (config.params == ParamFormat::fp32) {
    back.fp32 = to_host(static_cast<float*>(device_params), n);
  } else {
    back.half = to_host(static_cast<bf16*>(device_params), n);
  }
  cudaFree(device_params);
  ASSERT_EQ(back.bytes(), params.bytes()) << what << ": parameters differ";
  ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(cpu.state())) << what << ": state differs";
  const auto got_counters = gpu.counters(), want_counters = cpu.counters();
  ASSERT_EQ(got_counters.size(), want_counters.size()) << what;
  for (std::size_t c = 0; c < got_counters.size(); ++c) {
    EXPECT_EQ(got_counters[c].values, want_counters[c].values) << what << " counter " << got_counters[c].name;
  }
}

// Every format configuration with and without an fp32 fallback (min_q8_size), over layouts whose tensor
// boundaries fall inside 256-blocks (the kernel's guarded path) and tensors of whole blocks (its vectorized path).
TEST(FastpathCuda, TensorLayoutsAreBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA tensor layouts not checked: " << cuda_unavailable_reason();
  auto layouts = testing::tensor_layouts();
  layouts.push_back({4 * 256, 256, 512});
  for (const auto kind : {reference::OptimizerKind::cgad, reference::OptimizerKind::nesterov}) {
    for (StepConfig config : all_format_configs(kind)) {
      for (const std::size_t min_q8_size : {std::size_t{0}, std::size_t{300}}) {
        config.min_q8_size = min_q8_size;
        for (const auto& tensors : layouts) {
          expect_same_as_cpu(config, tensors, {{0, 0}, {0, 2}, {0, 5}}, nullptr,
                             describe(config) + " tensors=" + std::to_string(tensors.size()));
        }
      }
    }
  }
}

// PA-CGAD's fragments start at floor(f·n/P): with n = 1000 or 7·768 + 5 most start off a 16-byte boundary and all
// their chunks take the kernel's guarded path, with 7·768 they start aligned; P = 3 and 7, each fragment twice.
TEST(FastpathCuda, PaCgadFragmentsAreBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA PA-CGAD fragments not checked: " << cuda_unavailable_reason();
  for (StepConfig config : all_format_configs(reference::OptimizerKind::pa_cgad)) {
    for (const std::size_t fragments : {3u, 7u}) {
      config.fragments = fragments;
      std::vector<Event> events;
      for (std::size_t f = 0; f < fragments; ++f) events.push_back({f, static_cast<std::int64_t>(f % 3)});
      for (std::size_t f = fragments; f-- > 0;) events.push_back({f, 1});
      for (const std::size_t n : {std::size_t{1000}, std::size_t{7 * 768}, std::size_t{7 * 768 + 5}}) {
        expect_same_as_cpu(config, {n}, events, nullptr,
                           describe(config) + " P=" + std::to_string(fragments) + " n=" + std::to_string(n));
      }
    }
  }
}

// The steps on a stream of the caller's that does not synchronize with the legacy default stream.
TEST(FastpathCuda, NonDefaultStreamIsBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA on a created stream not checked: " << cuda_unavailable_reason();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (const StepConfig& config : all_format_configs(reference::OptimizerKind::cgad)) {
    expect_same_as_cpu(config, {3 * 256 + 17}, {{0, 0}, {0, 3}, {0, 1}}, stream, describe(config) + " own stream");
  }
  cudaStreamDestroy(stream);
}

// 2^24 + 257 parameters: 65538 chunks, more than the kernel's grid of 2^16 blocks, so blocks loop over chunks.
TEST(FastpathCuda, GridStridePastTwoToTheTwentyFourIsBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA grid-stride path not checked: " << cuda_unavailable_reason();
  const auto configs = all_format_configs(reference::OptimizerKind::cgad);
  // fp32 parameters and state; bf16 parameters, q8 state, both roundings.
  for (const std::size_t index : {std::size_t{0}, std::size_t{10}, std::size_t{11}}) {
    expect_same_as_cpu(configs[index], {(std::size_t{1} << 24) + 257}, {{0, 0}, {0, 2}}, nullptr,
                       describe(configs[index]) + " n=2^24+257");
  }
}

// A state saved by one backend loads into the other bit for bit (one file format).
TEST(FastpathCuda, StateFilesMoveBetweenBackends) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA state-file exchange not checked: " << cuda_unavailable_reason();
  StepConfig config = all_format_configs(reference::OptimizerKind::cgad)[10];  // bf16 params, q8 state, nearest
  const std::size_t n = 700;
  CpuOptimizer cpu(config, n, 2);
  Params params(config, random_vector(n, 80));
  params.step(cpu, random_vector(n, 81), 0);
  params.step(cpu, random_vector(n, 82), 2);
  const auto path = std::filesystem::temp_directory_path() / "cgad_fastpath_cuda_state.bin";
  cpu.save(path);
  CudaOptimizer gpu(config, n);
  gpu.load(path);
  ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(cpu.state()));
  gpu.save(path);
  CpuOptimizer back(config, n, 1);
  back.load(path);
  ASSERT_EQ(host_state_bytes(back.state()), host_state_bytes(cpu.state()));
  EXPECT_EQ(back.counters()[0].values, cpu.counters()[0].values);
  std::filesystem::remove(path);
}

#endif

}  // namespace
}  // namespace cgad::fastpath
