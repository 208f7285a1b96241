// `CudaOptimizer`: fastpath::CudaOptimizer for torch parameters on a CUDA device, one per param group, stepping on
// the caller's stream (torch's current stream). Its step takes the group's tensors where they lie: one device pointer
// per parameter and per pseudo-gradient (CudaOptimizer's table step, nothing gathered or scattered). In a build without
// the CUDA backend, or with no device, constructing one is an InputError, and cuda_available() /
// cuda_unavailable_reason() say so beforehand.
//
// The CUDA backend keeps its state on the device and moves it only through state files (cuda_optimizer.hpp), so
// the state bytes go through a private temporary file, and new hyperparameters rebuild the optimizer from its own
// state: the bytes are parsed under the old configuration and written again under the new one
// (state_file.hpp), which keeps every counter and every state byte.
#include "bindings.hpp"
#include "pointers.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/fastpath/state_file.hpp"

#include "arrays.hpp"
#include <pybind11/stl.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

namespace py = pybind11;

namespace cgad::python {
namespace {

using fastpath::CudaOptimizer;
using fastpath::StepConfig;

// A file of our own in the temporary directory, removed when it goes out of scope.
class TemporaryFile {
 public:
  TemporaryFile() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cgad-cuda-state.XXXXXX").string();
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw core::InputError("cannot create a temporary state file: " + std::string(std::strerror(errno)));
    ::close(fd);
    path_ = pattern;
  }
  ~TemporaryFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::vector<unsigned char> read() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write(std::span<const unsigned char> bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw core::InputError("cannot write a temporary state file " + path_.string());
  }

 private:
  std::filesystem::path path_;
};

class CudaGroup {
 public:
  CudaGroup(const StepConfig& config, std::vector<std::size_t> sizes)
      : config_(config), sizes_(std::move(sizes)), optimizer_(std::make_unique<CudaOptimizer>(config_, sizes_)) {}

  py::dict step(const std::vector<std::uintptr_t>& params, const std::vector<std::uintptr_t>& grads, std::int64_t tau,
                std::size_t fragment, std::uintptr_t stream) {
    auto* s = reinterpret_cast<CUstream_st*>(stream);
    const std::vector<const float*> g = pointers<const float>(grads);
    fastpath::StepReport report;
    if (config_.params == fastpath::ParamFormat::fp32) {
      const std::vector<float*> p = pointers<float>(params);
      py::gil_scoped_release release;
      optimizer_->step(std::span<float* const>(p), std::span<const float* const>(g), tau, fragment, s);
      report = optimizer_->report(s);
    } else {
      const std::vector<fastpath::bf16*> p = pointers<fastpath::bf16>(params);
      py::gil_scoped_release release;
      optimizer_->step(std::span<fastpath::bf16* const>(p), std::span<const float* const>(g), tau, fragment, s);
      report = optimizer_->report(s);
    }
    return report_dict(report);
  }

  void set_hyperparameters(const StepConfig& next) {
    fastpath::require_same_state_layout(config_, next);
    const fastpath::StepPlanner old(config_, sizes_);
    fastpath::LoadedState loaded =
        fastpath::parse_state_bytes(save_bytes(), "the CUDA state", old, fastpath::HostState::zeros(old));
    fastpath::StepPlanner planner(next, sizes_);
    planner.set_raw_counters(std::move(loaded.counters));
    auto rebuilt = std::make_unique<CudaOptimizer>(next, sizes_);
    load_into(*rebuilt, fastpath::state_bytes(planner, loaded.state));
    optimizer_ = std::move(rebuilt);
    config_ = next;
  }

  std::vector<unsigned char> save_bytes() {
    const TemporaryFile file;
    optimizer_->save(file.path());
    return file.read();
  }
  void load_bytes(std::span<const unsigned char> bytes) { load_into(*optimizer_, bytes); }

  CudaOptimizer& optimizer() { return *optimizer_; }

 private:
  static void load_into(CudaOptimizer& optimizer, std::span<const unsigned char> bytes) {
    const TemporaryFile file;
    file.write(bytes);
    optimizer.load(file.path());
  }

  StepConfig config_;
  std::vector<std::size_t> sizes_;
  std::unique_ptr<CudaOptimizer> optimizer_;
};

}  // namespace

void bind_cuda_optimizer(py::module_& m) {
  m.def("cuda_available", &fastpath::cuda_device_available,
        "True when this build has the CUDA backend and the process sees a CUDA device");
  m.def("cuda_unavailable_reason", &fastpath::cuda_unavailable_reason, "why not, in one line (empty when available)");
  py::class_<CudaGroup>(m, "CudaOptimizer")
      .def(py::init([](const py::dict& spec, std::vector<std::size_t> sizes) {
             return std::make_unique<CudaGroup>(step_config(spec), std::move(sizes));
           }),
           py::arg("spec"), py::arg("tensor_sizes"))
      .def("step", &CudaGroup::step, py::arg("params"), py::arg("grads"), py::arg("tau"), py::arg("fragment"),
           py::arg("stream"))
      .def("advance_round", [](CudaGroup& g) { g.optimizer().advance_round(); })
      .def("set_hyperparameters", [](CudaGroup& g, const py::dict& spec) { g.set_hyperparameters(step_config(spec)); })
      .def("save_bytes",
           [](CudaGroup& g) {
             const std::vector<unsigned char> bytes = g.save_bytes();
             return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
           })
      .def("load_bytes", [](CudaGroup& g, const py::buffer& bytes) { g.load_bytes(byte_span(bytes.request())); })
      .def("read_buffer",
           [](CudaGroup& g, const std::string& name) {
             auto [out, values] = numpy_empty<float>(g.optimizer().parameters());
             g.optimizer().read_buffer(name, values);
             return out;
           })
      .def("counters", [](CudaGroup& g) {
        py::dict out;
        for (const auto& c : g.optimizer().counters()) out[py::str(c.name)] = c.values;
        return out;
      });
}

}  // namespace cgad::python
