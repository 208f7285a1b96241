// CUDA backend against the CPU backend: the same bits and reports for every optimizer, format and rounding, over
// sizes around the block, with a NaN event and a zero-gate event in the stream; the table step over separate
// tensors, also over per-tensor state the caller owns; PA-CGAD's fragments, a caller's stream, two streams, a captured
// CUDA graph replayed, state files, and a device fault. Skips, saying why, where this process sees no CUDA device (or
// the build has no CUDA backend).
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"
#include "cgad/fastpath/thread_pool.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#if defined(CGAD_FASTPATH_HAS_CUDA)
#include <cuda_runtime_api.h>

using cgad::fastpath::detail::host_state_of;
#endif

namespace cgad::fastpath {
namespace {

using testing::all_format_configs;
using testing::describe;
using testing::expect_same_report;  // the whole report: σ, τ_eff and the refusals are decided on the device
using testing::Params;
using testing::random_vector;

TEST(FastpathCuda, ConstructionIsRefusedWithoutADevice) {
  if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(CudaOptimizer(StepConfig{}, 10), core::InputError);
  EXPECT_THROW(CudaEventVeto{}, core::InputError);
}

#if defined(CGAD_FASTPATH_HAS_CUDA)

template <class T>
T* to_device(const std::vector<T>& host) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), std::max<std::size_t>(1, host.size()) * sizeof(T)),
            cudaSuccess);
  if (!host.empty()) cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  // From pageable memory cudaMemcpy may return before the bytes land, and the legacy stream it ran on does not
  // order the non-blocking streams some tests step on.
  cudaDeviceSynchronize();
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
    append(s.bf16_values[k].data(), s.bf16_values[k].size() * 2);
    append(s.codes[k].data(), s.codes[k].size());
    append(s.absmax[k].data(), s.absmax[k].size() * 4);
  }
  return out;
}

// Device parameters of `config`'s format, and their bytes back on the host.
struct DeviceParams {
  DeviceParams(const StepConfig& config, const Params& host)
      : fp32(config.params == ParamFormat::fp32),
        data(fp32 ? static_cast<void*>(to_device(host.fp32)) : static_cast<void*>(to_device(host.bf16_values))),
        n(fp32 ? host.fp32.size() : host.bf16_values.size()) {}
  ~DeviceParams() { cudaFree(data); }
  DeviceParams(const DeviceParams&) = delete;
  DeviceParams& operator=(const DeviceParams&) = delete;
  void step(CudaOptimizer& gpu, const float* grad, std::size_t grad_size, std::int64_t tau, std::size_t fragment,
            cudaStream_t stream) const {
    if (fp32) {
      gpu.step(static_cast<float*>(data), n, grad, grad_size, tau, fragment, stream);
    } else {
      gpu.step(static_cast<bf16*>(data), n, grad, grad_size, tau, fragment, stream);
    }
  }
  Params back(const Params& like) const {
    Params out = like;
    if (fp32) {
      out.fp32 = to_host(static_cast<float*>(data), n);
    } else {
      out.bf16_values = to_host(static_cast<bf16*>(data), n);
    }
    return out;
  }
  bool fp32;
  void* data;
  std::size_t n;
};

// The counters of both backends, name by name.
void expect_same_counters(CudaOptimizer& gpu, const CpuOptimizer& cpu, cudaStream_t stream, const std::string& what) {
  const auto got = gpu.counters(stream), want = cpu.counters();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t c = 0; c < got.size(); ++c) {
    EXPECT_EQ(got[c].values, want[c].values) << what << " counter " << got[c].name;
  }
}

TEST(FastpathCuda, BitIdenticalToTheCpuBackend) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA-vs-CPU bit identity not checked: " << cuda_unavailable_reason();
  for (const auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::adam_decay, core::OptimizerKind::adam,
                          core::OptimizerKind::nesterov, core::OptimizerKind::sdm}) {
    for (StepConfig config : all_format_configs(kind)) {
      config.on_zero_gate = core::ZeroGatePolicy::skip;
      for (const std::size_t n :
           {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{256}, std::size_t{257}, std::size_t{5000}}) {
        CpuOptimizer cpu(config, n, 2);
        CudaOptimizer gpu(config, n);
        Params params(config, random_vector(n, 21));
        const DeviceParams device(config, params);
        const std::int64_t taus[] = {0, 3, 40, 1, 7};
        for (int e = 0; e < 5; ++e) {
          auto grad = random_vector(n, 30 + static_cast<std::uint32_t>(e));
          if (e == 3 && n > 0) grad[n / 2] = std::numeric_limits<float>::quiet_NaN();
          float* device_grad = to_device(grad);
          const StepReport want = params.step(cpu, grad, taus[e]);
          device.step(gpu, device_grad, n, taus[e], 0, nullptr);
          expect_same_report(gpu.report(), want,
                             describe(config) + " n=" + std::to_string(n) + " event " + std::to_string(e));
          cudaFree(device_grad);
        }
        ASSERT_EQ(device.back(params).bytes(), params.bytes())
            << describe(config) << " n=" << n << ": parameters differ";
        ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(host_state_of(cpu)))
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
  CudaOptimizer gpu(config, tensors, stream);
  const std::size_t n = cpu.parameters();
  Params params(config, random_vector(n, 21));
  const DeviceParams device(config, params);
  for (std::size_t e = 0; e < events.size(); ++e) {
    const Event& event = events[e];
    const auto grad = random_vector(cpu.fragment_size(event.fragment), 30 + static_cast<std::uint32_t>(e));
    float* device_grad = to_device(grad);
    const StepReport want = params.step(cpu, grad, event.tau, event.fragment);
    device.step(gpu, device_grad, grad.size(), event.tau, event.fragment, stream);
    // On the legacy default stream: ordered after the step on `stream` all the same (cuda_optimizer.hpp). It waits
    // for the step, so the gradient can be freed.
    expect_same_report(gpu.report(), want, what + " event " + std::to_string(e));
    cudaFree(device_grad);
    cpu.advance_round();
    gpu.advance_round(stream);
  }
  ASSERT_EQ(device.back(params).bytes(), params.bytes()) << what << ": parameters differ";
  ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(host_state_of(cpu))) << what << ": state differs";
  expect_same_counters(gpu, cpu, nullptr, what);
}

// Every format configuration (and the q8 ones with the zero-free v map) with and without an fp32 fallback
// (min_q8_size), over layouts whose tensor boundaries fall inside 256-blocks (the kernel's guarded path) and tensors
// of whole blocks (its vectorized path).
TEST(FastpathCuda, TensorLayoutsAreBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA tensor layouts not checked: " << cuda_unavailable_reason();
  auto layouts = testing::tensor_layouts();
  layouts.push_back({4 * 256, 256, 512});
  for (const auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::nesterov}) {
    std::vector<StepConfig> configs = all_format_configs(kind);
    for (const StepConfig& config : testing::zero_free_configs(kind)) configs.push_back(config);
    for (StepConfig config : configs) {
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
  for (StepConfig config : all_format_configs(core::OptimizerKind::pa_cgad)) {
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

// The table step (a device pointer per tensor, the tensors in separate allocations, as torch's parameters) against
// the CPU table step: the same reports, parameter bits, state bytes and counters, over a layout with boundaries
// inside 256-blocks and layouts of more tensors than one launch holds (71, 129), every format, PA-CGAD's fragments,
// and events refused for a NaN in the last tensor and for an overflow.
TEST(FastpathCuda, TableStepIsBitIdenticalToTheCpuTableStep) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA table step not checked: " << cuda_unavailable_reason();
  std::vector<std::vector<std::size_t>> layouts = {{257, 256, 0, 300}, {}, {}};
  for (std::size_t k = 0; k < 71; ++k) layouts[1].push_back((k * 37) % 300 + 1);
  for (std::size_t k = 0; k < 129; ++k) layouts[2].push_back(k == 64 ? 600 : 3);
  std::vector<StepConfig> configs = all_format_configs(core::OptimizerKind::cgad);
  for (StepConfig config : all_format_configs(core::OptimizerKind::pa_cgad)) {
    config.fragments = 3;
    configs.push_back(config);
  }
  for (const StepConfig& config : configs) {
    for (const auto& sizes : layouts) {
      const std::string what = describe(config) + " tensors=" + std::to_string(sizes.size());
      CpuOptimizer cpu(config, sizes, 2);
      CudaOptimizer gpu(config, sizes);
      const std::size_t n = cpu.parameters();
      const Params initial(config, random_vector(n, 41));
      std::vector<Params> host;
      std::vector<std::unique_ptr<DeviceParams>> device;
      for (std::size_t k = 0, at = 0; k < sizes.size(); at += sizes[k], ++k) {
        Params part = initial;
        const auto cut = [&](auto& v) {
          if (!v.empty())
            v.assign(v.begin() + static_cast<std::ptrdiff_t>(at),
                     v.begin() + static_cast<std::ptrdiff_t>(at + sizes[k]));
        };
        cut(part.fp32);
        cut(part.bf16_values);
        host.push_back(part);
        device.push_back(std::make_unique<DeviceParams>(config, part));
      }
      for (std::size_t e = 0; e < 8; ++e) {
        const std::size_t fragment = e % config.fragments;
        std::vector<float> grad = random_vector(n, 50 + static_cast<std::uint32_t>(e));
        if (e == 3 && n > 0) grad[n - 1] = std::numeric_limits<float>::quiet_NaN();
        if (e == 5 && n > 0) grad[n / 2] = 0x1p100f;
        std::vector<std::vector<float>> grads;
        std::vector<float*> device_grads;
        std::vector<const float*> host_grad_table, device_grad_table;
        std::vector<float*> host_fp32, device_fp32;
        std::vector<bf16*> host_bf16, device_half;
        for (std::size_t k = 0, at = 0; k < sizes.size(); at += sizes[k], ++k) {
          grads.emplace_back(grad.begin() + static_cast<std::ptrdiff_t>(at),
                             grad.begin() + static_cast<std::ptrdiff_t>(at + sizes[k]));
          device_grads.push_back(to_device(grads.back()));
          host_grad_table.push_back(grads.back().empty() ? nullptr : grads.back().data());
          device_grad_table.push_back(device_grads.back());
          host_fp32.push_back(host[k].fp32.empty() ? nullptr : host[k].fp32.data());
          host_bf16.push_back(host[k].bf16_values.empty() ? nullptr : host[k].bf16_values.data());
          device_fp32.push_back(static_cast<float*>(device[k]->data));
          device_half.push_back(static_cast<bf16*>(device[k]->data));
        }
        const auto tau = static_cast<std::int64_t>(e % 4);
        StepReport want;
        if (config.params == ParamFormat::fp32) {
          want = cpu.step(std::span<float* const>(host_fp32), host_grad_table, tau, fragment);
          gpu.step(std::span<float* const>(device_fp32), device_grad_table, tau, fragment, nullptr);
        } else {
          want = cpu.step(std::span<bf16* const>(host_bf16), host_grad_table, tau, fragment);
          gpu.step(std::span<bf16* const>(device_half), device_grad_table, tau, fragment, nullptr);
        }
        expect_same_report(gpu.report(), want, what + " event " + std::to_string(e));
        for (float* g : device_grads) cudaFree(g);
        cpu.advance_round();
        gpu.advance_round();
      }
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        ASSERT_EQ(device[k]->back(host[k]).bytes(), host[k].bytes()) << what << ": tensor " << k << " differs";
      }
      ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(host_state_of(cpu))) << what << ": state differs";
      expect_same_counters(gpu, cpu, nullptr, what);
    }
  }
}

// One tensor's state buffers (values, then absmax, per moment) as bytes, at the zero state its shape gives (q8
// codes at the map's code of 0, as cgad.torch's fresh_state makes them).
std::vector<std::vector<unsigned char>> zero_state(const TensorStateShape& s) {
  const std::size_t width = s.kind == "bf16" ? 2 : s.kind == "q8" ? 1 : 4;
  std::vector<std::vector<unsigned char>> out;
  for (int m = 0; m < s.moments; ++m) {
    out.emplace_back(s.values * width, s.kind == "q8" ? s.initial_code[m] : 0);
    out.emplace_back(s.absmax * 4, 0);
  }
  return out;
}

// CudaTableStepper over state the caller owns in per-tensor device allocations (as cgad.torch's CUDA groups hold
// it) against TableStepper over the same in host allocations: every format, PA-CGAD's fragments, a NaN event, an
// overflow event and a tensor left out of one event (a null gradient): parameters, state, counters and reports bit
// for bit.
TEST(FastpathCuda, CallerOwnedStateTableStepIsBitIdenticalToTheCpuTableStepper) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA caller-owned state not checked: " << cuda_unavailable_reason();
  const std::vector<std::size_t> sizes = {257, 256, 0, 300, 5};
  std::vector<StepConfig> configs;
  for (StepConfig config : all_format_configs(core::OptimizerKind::cgad)) {
    configs.push_back(config);
    config.min_q8_size = 300;
    configs.push_back(config);
  }
  for (StepConfig config : all_format_configs(core::OptimizerKind::pa_cgad)) {
    config.fragments = 3;
    configs.push_back(config);
  }
  for (const StepConfig& config : configs) {
    const std::string what = describe(config);
    TableStepper cpu(config, sizes, std::make_shared<ThreadPool>(2));
    CudaTableStepper gpu(config, sizes);
    const std::size_t n = cpu.parameters();
    std::vector<std::vector<std::vector<unsigned char>>> host_state;
    std::vector<std::vector<void*>> device_state;
    std::vector<TensorState> host_entries, device_entries;
    std::vector<Params> host;
    std::vector<std::unique_ptr<DeviceParams>> device;
    const Params initial(config, random_vector(n, 43));
    for (std::size_t k = 0, at = 0; k < sizes.size(); at += sizes[k], ++k) {
      host_state.push_back(zero_state(cpu.shape(k)));
      std::vector<void*> host_buffers, device_buffers;
      for (auto& buffer : host_state.back()) {
        host_buffers.push_back(buffer.data());
        device_buffers.push_back(to_device(buffer));
      }
      device_state.push_back(device_buffers);
      host_entries.push_back(cpu.entry(k, host_buffers));
      device_entries.push_back(gpu.entry(k, device_buffers));
      Params part = initial;
      const auto cut = [&](auto& v) {
        if (!v.empty())
          v.assign(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + sizes[k]));
      };
      cut(part.fp32);
      cut(part.bf16_values);
      host.push_back(part);
      device.push_back(std::make_unique<DeviceParams>(config, part));
    }
    for (std::size_t e = 0; e < 8; ++e) {
      const std::size_t fragment = e % config.fragments;
      std::vector<float> grad = random_vector(n, 60 + static_cast<std::uint32_t>(e));
      if (e == 3) grad[n - 1] = std::numeric_limits<float>::quiet_NaN();
      if (e == 5) grad[n / 2] = 0x1p100f;
      std::vector<std::vector<float>> grads;
      std::vector<float*> device_grads;
      std::vector<const float*> host_grad_table, device_grad_table;
      std::vector<float*> host_fp32, device_fp32;
      std::vector<bf16*> host_bf16, device_half;
      for (std::size_t k = 0, at = 0; k < sizes.size(); at += sizes[k], ++k) {
        grads.emplace_back(grad.begin() + static_cast<std::ptrdiff_t>(at),
                           grad.begin() + static_cast<std::ptrdiff_t>(at + sizes[k]));
        device_grads.push_back(to_device(grads.back()));
        const bool left_out = e == 2 && k == 0;  // a parameter without a gradient in this event
        host_grad_table.push_back(grads.back().empty() || left_out ? nullptr : grads.back().data());
        device_grad_table.push_back(left_out ? nullptr : device_grads.back());
        host_fp32.push_back(host[k].fp32.empty() ? nullptr : host[k].fp32.data());
        host_bf16.push_back(host[k].bf16_values.empty() ? nullptr : host[k].bf16_values.data());
        device_fp32.push_back(static_cast<float*>(device[k]->data));
        device_half.push_back(static_cast<bf16*>(device[k]->data));
      }
      const auto tau = static_cast<std::int64_t>(e % 4);
      StepReport want;
      std::uint64_t ticket = 0;
      if (config.params == ParamFormat::fp32) {
        want = cpu.step(std::span<float* const>(host_fp32), host_grad_table, host_entries, tau, fragment);
        ticket =
            gpu.step(std::span<float* const>(device_fp32), device_grad_table, device_entries, tau, fragment, nullptr);
      } else {
        want = cpu.step(std::span<bf16* const>(host_bf16), host_grad_table, host_entries, tau, fragment);
        ticket =
            gpu.step(std::span<bf16* const>(device_half), device_grad_table, device_entries, tau, fragment, nullptr);
      }
      expect_same_report(gpu.report(ticket).own, want, what + " event " + std::to_string(e));
      for (float* g : device_grads) cudaFree(g);
      cpu.advance_round();
      gpu.advance_round();
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      ASSERT_EQ(device[k]->back(host[k]).bytes(), host[k].bytes()) << what << ": tensor " << k << " differs";
      for (std::size_t b = 0; b < host_state[k].size(); ++b) {
        ASSERT_EQ(to_host(static_cast<unsigned char*>(device_state[k][b]), host_state[k][b].size()), host_state[k][b])
            << what << ": tensor " << k << "'s state buffer " << b << " differs";
        cudaFree(device_state[k][b]);
      }
    }
    const StepCounters got = gpu.raw_counters(), expected = cpu.raw_counters();
    EXPECT_EQ(got.t, expected.t) << what;
    EXPECT_EQ(got.last_sync, expected.last_sync) << what;
    EXPECT_EQ(got.round, expected.round) << what;
    EXPECT_EQ(got.steps, expected.steps) << what;
  }
}

// The steps on a stream of the caller's that does not synchronize with the legacy default stream.
TEST(FastpathCuda, NonDefaultStreamIsBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA on a created stream not checked: " << cuda_unavailable_reason();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (const StepConfig& config : all_format_configs(core::OptimizerKind::cgad)) {
    expect_same_as_cpu(config, {3 * 256 + 17}, {{0, 0}, {0, 3}, {0, 1}}, stream, describe(config) + " own stream");
  }
  cudaStreamDestroy(stream);
}

// 2^24 + 257 parameters: 65538 chunks, more than the kernel's grid of 2^16 blocks, so blocks loop over chunks.
TEST(FastpathCuda, GridStridePastTwoToTheTwentyFourIsBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA grid-stride path not checked: " << cuda_unavailable_reason();
  const auto configs = all_format_configs(core::OptimizerKind::cgad);
  // fp32 parameters and state; bf16 parameters, q8 state, both roundings.
  for (const std::size_t index : {std::size_t{0}, std::size_t{10}, std::size_t{11}}) {
    expect_same_as_cpu(configs[index], {(std::size_t{1} << 24) + 257}, {{0, 0}, {0, 2}}, nullptr,
                       describe(configs[index]) + " n=2^24+257");
  }
}

// One round of events (every fragment once, then advance_round) captured into a CUDA graph and the graph launched
// three times: the counters advance on the device at each replay, so the result is three rounds of uncaptured
// steps on the CPU backend, bit for bit, counters included.
TEST(FastpathCuda, CapturedGraphReplayedThreeTimesIsBitIdentical) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA graph capture not checked: " << cuda_unavailable_reason();
  std::vector<StepConfig> configs;
  for (const auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::nesterov}) {
    for (const StepConfig& config : all_format_configs(kind)) configs.push_back(config);
  }
  for (StepConfig config : all_format_configs(core::OptimizerKind::pa_cgad)) {
    config.fragments = 3;
    configs.push_back(config);
  }
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (const StepConfig& config : configs) {
    const std::string what = describe(config) + " P=" + std::to_string(config.fragments);
    const std::size_t n = 3 * 256 + 41;
    CpuOptimizer cpu(config, n, 2);
    CudaOptimizer gpu(config, n, stream);
    Params params(config, random_vector(n, 51));
    const DeviceParams device(config, params);
    std::vector<std::vector<float>> grads;
    std::vector<float*> device_grads;
    for (std::size_t f = 0; f < config.fragments; ++f) {
      grads.push_back(random_vector(cpu.fragment_size(f), 60 + static_cast<std::uint32_t>(f)));
      device_grads.push_back(to_device(grads.back()));
    }
    StepReport want;
    for (int round = 0; round < 3; ++round) {
      for (std::size_t f = 0; f < config.fragments; ++f) want = params.step(cpu, grads[f], 1, f);
      cpu.advance_round();
    }
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    for (std::size_t f = 0; f < config.fragments; ++f) {
      device.step(gpu, device_grads[f], grads[f].size(), 1, f, stream);
    }
    gpu.advance_round(stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess) << what;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess) << what;
    for (int replay = 0; replay < 3; ++replay) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess) << what;
    expect_same_report(gpu.report(stream), want, what + " last replay");
    ASSERT_EQ(device.back(params).bytes(), params.bytes()) << what << ": parameters differ";
    ASSERT_EQ(host_state_bytes(gpu.download(stream)), host_state_bytes(host_state_of(cpu)))
        << what << ": state differs";
    expect_same_counters(gpu, cpu, stream, what);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    for (float* g : device_grads) cudaFree(g);
  }
  cudaStreamDestroy(stream);
}

// Calls that wait for the device cannot be captured: refused with InputError, and the capture stays valid.
TEST(FastpathCuda, ReadsInsideACaptureAreRefused) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA capture refusals not checked: " << cuda_unavailable_reason();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  CudaOptimizer gpu(StepConfig{}, 300, stream);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_THROW(gpu.report(stream), core::InputError);
  EXPECT_THROW(gpu.download(stream), core::InputError);
  EXPECT_THROW(gpu.counters(stream), core::InputError);
  EXPECT_THROW(CudaOptimizer(StepConfig{}, 10, stream), core::InputError);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_NO_THROW(gpu.report(stream));
  cudaStreamDestroy(stream);
}

// Steps alternating between two non-blocking streams (which do not order each other) over 2^22 parameters, read on
// the legacy stream: each call waits on the device for the optimizer's previous one, so the result is the CPU's.
TEST(FastpathCuda, StepsOnTwoStreamsAreOrdered) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA stream ordering not checked: " << cuda_unavailable_reason();
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (auto& s : streams) ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const StepConfig config = all_format_configs(core::OptimizerKind::cgad)[10];  // bf16 params, q8 state
  const std::size_t n = std::size_t{1} << 22;
  CpuOptimizer cpu(config, n, 2);
  CudaOptimizer gpu(config, n, streams[1]);
  Params params(config, random_vector(n, 70));
  const DeviceParams device(config, params);
  std::vector<float*> device_grads;
  for (int e = 0; e < 4; ++e) {
    const auto grad = random_vector(n, 71 + static_cast<std::uint32_t>(e));
    params.step(cpu, grad, e);
    device_grads.push_back(to_device(grad));
    device.step(gpu, device_grads.back(), n, e, 0, streams[e % 2]);
  }
  ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(host_state_of(cpu)));
  ASSERT_EQ(device.back(params).bytes(), params.bytes());
  for (float* g : device_grads) cudaFree(g);
  for (auto& s : streams) cudaStreamDestroy(s);
}

// A kernel fault (here: the pseudo-gradient at an address in the never-mapped first page) makes the optimizer unusable
// with a message saying so at the next call and every call after, instead of a misleading error one step later. A fault
// corrupts the process's CUDA context, so it runs in a child process (a re-executed test binary).
TEST(FastpathCuda, AFaultMakesTheOptimizerUnusable) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA fault latching not checked: " << cuda_unavailable_reason();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto child = [] {
    const StepConfig config = all_format_configs(core::OptimizerKind::cgad)[0];
    const std::size_t n = 1 << 16;
    CudaOptimizer gpu(config, n);
    Params params(config, random_vector(n, 90));
    const DeviceParams device(config, params);
    const auto* nowhere = reinterpret_cast<const float*>(std::uintptr_t{64});  // in the never-mapped first page
    // The fault may surface in the step itself (a later launch of it, or its ordering event) or at the next call;
    // from then on every call refuses.
    int call = 0;
    const auto refused = [&](const auto& what) {
      try {
        what();
      } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "call %d: %s\n", call++, e.what());
        return std::string(e.what()).find("unusable") != std::string::npos;
      }
      std::fprintf(stderr, "call %d did not throw\n", call++);
      return false;
    };
    try {
      device.step(gpu, nowhere, n, 0, 0, nullptr);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "the step itself: %s\n", e.what());
    }
    if (!refused([&] { gpu.report(); })) std::exit(1);
    if (!refused([&] { gpu.report(); })) std::exit(1);
    std::exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "call 1: this CUDA optimizer is unusable");
}

// A state saved by one backend loads into the other bit for bit (one file format).
TEST(FastpathCuda, StateFilesMoveBetweenBackends) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA state-file exchange not checked: " << cuda_unavailable_reason();
  StepConfig config = all_format_configs(core::OptimizerKind::cgad)[10];  // bf16 params, q8 state, nearest
  const std::size_t n = 700;
  CpuOptimizer cpu(config, n, 2);
  Params params(config, random_vector(n, 80));
  params.step(cpu, random_vector(n, 81), 0);
  params.step(cpu, random_vector(n, 82), 2);
  const auto path = std::filesystem::temp_directory_path() / "cgad_fastpath_cuda_state.bin";
  cpu.save(path);
  CudaOptimizer gpu(config, n);
  gpu.load(path);
  ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(host_state_of(cpu)));
  gpu.save(path);
  CpuOptimizer back(config, n, 1);
  back.load(path);
  ASSERT_EQ(host_state_bytes(host_state_of(back)), host_state_bytes(host_state_of(cpu)));
  EXPECT_EQ(back.counters()[0].values, cpu.counters()[0].values);
  std::filesystem::remove(path);
}

// save_bytes / load_bytes, in memory (no file): a state from either backend loads into the other, bit for bit and
// with its counters; a corrupt byte is refused and changes nothing on the device.
TEST(FastpathCuda, StateBytesMoveBetweenBackends) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA state bytes not checked: " << cuda_unavailable_reason();
  for (StepConfig config : all_format_configs(core::OptimizerKind::pa_cgad)) {
    config.fragments = 2;
    const std::size_t n = 700;
    CpuOptimizer cpu(config, n, 2);
    Params params(config, random_vector(n, 80));
    params.step(cpu, random_vector(cpu.fragment_size(0), 81), 0, 0);
    cpu.advance_round();
    params.step(cpu, random_vector(cpu.fragment_size(1), 82), 2, 1);
    CudaOptimizer gpu(config, n);
    gpu.load_bytes(cpu.save_bytes());
    ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(host_state_of(cpu))) << describe(config);
    expect_same_counters(gpu, cpu, nullptr, describe(config));
    std::vector<unsigned char> bytes = gpu.save_bytes();
    ASSERT_EQ(bytes, cpu.save_bytes()) << describe(config);
    CpuOptimizer back(config, n, 1);
    back.load_bytes(bytes);
    ASSERT_EQ(host_state_bytes(host_state_of(back)), host_state_bytes(host_state_of(cpu)));
    bytes[bytes.size() / 2] ^= 1;
    CudaOptimizer fresh(config, n);
    const auto before = host_state_bytes(fresh.download());
    EXPECT_THROW(fresh.load_bytes(bytes), core::InputError);
    EXPECT_EQ(host_state_bytes(fresh.download()), before);
  }
}

// set_hyperparameters on both backends before every event (lr decaying, alpha and tau_cut changed from event 3, which
// rebuilds PA-CGAD's σ(a) table on the device): the same bits, reports and counters; a change of what the state
// depends on is refused with the CPU's message and changes nothing.
TEST(FastpathCuda, AnLrScheduleIsBitIdenticalAndKeepsTheDeviceCounters) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA set_hyperparameters not checked: " << cuda_unavailable_reason();
  std::vector<StepConfig> configs = all_format_configs(core::OptimizerKind::cgad);
  for (StepConfig config : all_format_configs(core::OptimizerKind::pa_cgad)) {
    config.fragments = 2;
    configs.push_back(config);
  }
  for (const StepConfig& base : configs) {
    const std::string what = describe(base);
    const std::size_t n = 1500;
    CpuOptimizer cpu(base, n, 2);
    CudaOptimizer gpu(base, n);
    Params host(base, random_vector(n, 61));
    const DeviceParams device(base, host);
    for (std::size_t e = 0; e < 7; ++e) {
      StepConfig next = base;
      next.adam.lr *= 1.0f / static_cast<float>(1 + e);
      if (e >= 3) {
        next.alpha = 0.05;
        next.tau_cut = 24;
      }
      cpu.set_hyperparameters(next);
      gpu.set_hyperparameters(next);
      const std::size_t fragment = e % base.fragments;
      std::vector<float> grad = random_vector(cpu.fragment_size(fragment), 62 + static_cast<std::uint32_t>(e));
      float* device_grad = to_device(grad);
      const auto tau = static_cast<std::int64_t>(e % 3);
      const StepReport want = host.step(cpu, grad, tau, fragment);
      device.step(gpu, device_grad, grad.size(), tau, fragment, nullptr);
      expect_same_report(gpu.report(), want, what + " event " + std::to_string(e));
      cudaFree(device_grad);
      cpu.advance_round();
      gpu.advance_round();
    }
    ASSERT_EQ(device.back(host).bytes(), host.bytes()) << what;
    ASSERT_EQ(host_state_bytes(gpu.download()), host_state_bytes(host_state_of(cpu))) << what;
    expect_same_counters(gpu, cpu, nullptr, what);
    StepConfig other = base;
    other.state = base.state == StateFormat::fp32 ? StateFormat::bf16 : StateFormat::fp32;
    const auto state = host_state_bytes(gpu.download());
    try {
      gpu.set_hyperparameters(other);
      ADD_FAILURE() << what << ": a new state format was taken";
    } catch (const core::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("must keep the optimizer's state format"), std::string::npos) << e.what();
    }
    EXPECT_EQ(host_state_bytes(gpu.download()), state) << what;
    EXPECT_EQ(gpu.config().adam.lr, cpu.config().adam.lr) << what;
  }
}

// Three optimizers stepping each event as cgad.torch's CUDA param groups do (previews against one shared veto, then
// step_previewed, nothing read back in between), against three CpuOptimizers stepped as its CPU groups are: a NaN in
// one group's Δ (event 3) or an overflow in another's (event 5) changes no group; the reports read later by ticket
// say which group refused and which were vetoed.
TEST(FastpathCuda, ThreeOptimizersSharingAVetoRefuseAnEventTogether) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA event veto not checked: " << cuda_unavailable_reason();
  const std::vector<StepConfig> all = all_format_configs(core::OptimizerKind::cgad);
  const std::vector<std::vector<std::size_t>> sizes = {{300, 5}, {1024}, {7, 0, 600}};
  std::vector<std::unique_ptr<CpuOptimizer>> cpu;
  std::vector<std::unique_ptr<CudaOptimizer>> gpu;
  std::vector<Params> host;
  std::vector<std::unique_ptr<DeviceParams>> device;
  for (std::size_t g = 0; g < 3; ++g) {
    const StepConfig& config = all[(g * 5) % all.size()];
    cpu.push_back(std::make_unique<CpuOptimizer>(config, sizes[g], 2));
    gpu.push_back(std::make_unique<CudaOptimizer>(config, sizes[g]));
    host.emplace_back(config, random_vector(cpu.back()->parameters(), 70 + static_cast<std::uint32_t>(g)));
    device.push_back(std::make_unique<DeviceParams>(config, host.back()));
  }
  CudaEventVeto veto;
  // One contiguous allocation per group, cut into its tensors: the table's pointers.
  const auto table = [&](std::size_t g, auto* base) {
    std::vector<decltype(base)> out;
    std::size_t at = 0;
    for (const std::size_t size : sizes[g]) {
      out.push_back(base + at);
      at += size;
    }
    return out;
  };
  for (std::size_t e = 0; e < 7; ++e) {
    const auto tau = static_cast<std::int64_t>(e % 3);
    std::vector<std::vector<float>> grads;
    std::vector<float*> device_grads;
    bool refused = false;
    std::vector<StepReport> previews;
    veto.reset(nullptr);
    for (std::size_t g = 0; g < 3; ++g) {
      grads.push_back(random_vector(cpu[g]->parameters(), 90 + static_cast<std::uint32_t>(10 * e + g)));
      if (e == 3 && g == 1) grads.back()[5] = std::numeric_limits<float>::infinity();
      if (e == 5 && g == 2) grads.back().back() = 0x1p100f;
      device_grads.push_back(to_device(grads.back()));
      const auto host_table = table(g, static_cast<const float*>(grads.back().data()));
      const auto device_table = table(g, static_cast<const float*>(device_grads.back()));
      previews.push_back(cpu[g]->preview(host_table, tau));
      refused = refused || previews.back().reason == core::SkipReason::nonfinite_gradient ||
                previews.back().reason == core::SkipReason::overflowing_gradient;
      gpu[g]->preview(device_table, tau, 0, &veto, nullptr);
    }
    ASSERT_EQ(refused, e == 3 || e == 5);
    std::vector<std::uint64_t> tickets;
    for (std::size_t g = 0; g < 3; ++g) {
      const auto device_table = table(g, static_cast<const float*>(device_grads[g]));
      if (device[g]->fp32) {
        tickets.push_back(
            gpu[g]->step_previewed(table(g, static_cast<float*>(device[g]->data)), device_table, &veto, nullptr));
        if (!refused)
          cpu[g]->step(table(g, host[g].fp32.data()), table(g, static_cast<const float*>(grads[g].data())), tau);
      } else {
        tickets.push_back(
            gpu[g]->step_previewed(table(g, static_cast<bf16*>(device[g]->data)), device_table, &veto, nullptr));
        if (!refused) {
          cpu[g]->step(table(g, host[g].bf16_values.data()), table(g, static_cast<const float*>(grads[g].data())), tau);
        }
      }
    }
    veto.finish(nullptr);
    for (std::size_t g = 0; g < 3; ++g) {
      const CudaStepReport r = gpu[g]->report(tickets[g]);
      const std::string what = "event " + std::to_string(e) + " group " + std::to_string(g);
      expect_same_report(r.own, previews[g], what);
      EXPECT_EQ(r.vetoed, refused) << what;
      cudaFree(device_grads[g]);
    }
  }
  for (std::size_t g = 0; g < 3; ++g) {
    ASSERT_EQ(device[g]->back(host[g]).bytes(), host[g].bytes()) << "group " << g;
    ASSERT_EQ(host_state_bytes(gpu[g]->download()), host_state_bytes(host_state_of(*cpu[g]))) << "group " << g;
    expect_same_counters(*gpu[g], *cpu[g], nullptr, "group " + std::to_string(g));
  }
}

// report(ticket): each of the last kReportHistory steps' own report, read after later steps ran; older and
// future tickets are refused.
TEST(FastpathCuda, ReportsAreKeptByTicket) {
  if (!cuda_device_available()) GTEST_SKIP() << "CUDA report tickets not checked: " << cuda_unavailable_reason();
  const StepConfig config = all_format_configs(core::OptimizerKind::cgad).front();
  const std::size_t n = 300;
  CpuOptimizer cpu(config, n, 1);
  CudaOptimizer gpu(config, n);
  Params host(config, random_vector(n, 5));
  const DeviceParams device(config, host);
  std::vector<StepReport> want;
  const std::uint64_t steps = CudaOptimizer::kReportHistory + 6;
  for (std::uint64_t e = 0; e < steps; ++e) {
    std::vector<float> grad = random_vector(n, 6 + static_cast<std::uint32_t>(e));
    if (e % 7 == 3) grad[e % n] = std::numeric_limits<float>::quiet_NaN();
    float* device_grad = to_device(grad);
    want.push_back(host.step(cpu, grad, static_cast<std::int64_t>(e % 5)));
    device.step(gpu, device_grad, n, static_cast<std::int64_t>(e % 5), 0, nullptr);
    EXPECT_EQ(gpu.last_ticket(), e + 1);
    cudaFree(device_grad);  // cudaFree waits for the device: the step has run
  }
  for (std::uint64_t ticket = steps - CudaOptimizer::kReportHistory + 1; ticket <= steps; ++ticket) {
    const CudaStepReport r = gpu.report(ticket);
    expect_same_report(r.own, want[ticket - 1], "ticket " + std::to_string(ticket));
    EXPECT_FALSE(r.vetoed);
  }
  EXPECT_THROW(gpu.report(steps - CudaOptimizer::kReportHistory), core::InputError);
  EXPECT_THROW(gpu.report(std::uint64_t{0}), core::InputError);
  EXPECT_THROW(gpu.report(steps + 1), core::InputError);
}

#endif

}  // namespace
}  // namespace cgad::fastpath
