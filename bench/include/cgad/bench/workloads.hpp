#pragma once
// The work the benchmarks time, set up once and run many times: the step's in-place twin (the roofline: the
// step's own bytes with no arithmetic), a plain copy of the same number of bytes (the older baseline), the
// fast-path CPU step, the reference step in MPFR, and a hand-written loop of raw mpfr_* calls doing the same
// arithmetic. bench/*_bench.cpp time them with Google Benchmark; `cgad bench`
// times them with measure() for its summary. Both count bytes and parameters the same way, here.
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/fastpath/thread_pool.hpp"
#include "cgad/reference/optimizers.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace cgad::bench {

// Bytes one fast-path step reads and writes for n parameters: parameters (read + write), the fp32
// pseudo-gradient (read), each moment (read + write) in its format, and for q8 each block's absmax
// (read + write). This is the traffic the bandwidth limit applies to; scratch inside a core is free.
double step_bytes(const fastpath::StepConfig& config, std::size_t n);

// Copies `bytes` / 2 bytes from one buffer to another per run — `bytes` of traffic — split over `threads`
// threads, as the step is.
class CopyWorkload {
 public:
  CopyWorkload(std::size_t bytes, unsigned threads);
  void run();
  double bytes() const { return 2.0 * static_cast<double>(source_.size()); }

 private:
  std::vector<unsigned char> source_, target_;
  fastpath::ThreadPool pool_;
};

// The honest roofline of a step: one pass over buffers laid out as the step's (its parameter and state formats,
// n elements, a q8 absmax per 256) that reads and writes, in place, exactly the bytes step_bytes() counts — the
// pseudo-gradient read, the parameters and every moment read and written — with one integer operation per
// element, split over the same thread pool and the same 256-element blocks as the step, compiled for the ISA the
// step runs. What the step would
// cost if its arithmetic were free; a memcpy is not that (it moves the bytes between two buffers, and glibc
// switches to non-temporal stores past a size it guesses from the cache, which the step cannot use).
class InPlaceWorkload {
 public:
  InPlaceWorkload(const fastpath::StepConfig& config, std::size_t n, unsigned threads);
  void run();
  double bytes() const { return step_bytes(config_, grad_.size()); }
  fastpath::CpuIsa isa() const { return isa_; }

 private:
  fastpath::StepConfig config_;
  std::vector<float> grad_;
  std::vector<std::uint32_t> params32_;
  std::vector<std::uint16_t> params16_;
  std::vector<std::uint32_t> moments32_[2];
  std::vector<std::uint16_t> moments16_[2];
  std::vector<std::uint8_t> codes_[2];
  std::vector<float> absmax_[2];
  fastpath::ThreadPool pool_;
  fastpath::CpuIsa isa_;  // the step's (selected_cpu_isa), whose vector width the twin's loop uses too
};

// One outer step of CpuOptimizer per run over n parameters, on a fixed pseudo-gradient with τ = 1 (σ < 1, so
// the gate and the bias corrections are exercised; every run is an applied step).
class FastpathCpuWorkload {
 public:
  FastpathCpuWorkload(const fastpath::StepConfig& config, std::size_t n, unsigned threads);
  void run();
  double bytes() const { return step_bytes(optimizer_.config(), grad_.size()); }
  double parameters() const { return static_cast<double>(grad_.size()); }
  unsigned threads() const { return optimizer_.threads(); }
  fastpath::CpuIsa isa() const { return optimizer_.isa(); }

 private:
  fastpath::CpuOptimizer optimizer_;
  std::vector<float> params_fp32_;
  std::vector<fastpath::bf16> params_bf16_;
  std::vector<float> grad_;
};

// One reference CGAD step per run over n parameters at the current MPFR working precision.
class ReferenceWorkload {
 public:
  explicit ReferenceWorkload(std::size_t n);
  void run();
  std::span<const reference::mpfr_real> params() const { return params_; }

 private:
  std::unique_ptr<reference::OuterOptimizer<reference::mpfr_real>> optimizer_;
  std::vector<reference::mpfr_real> params_, grad_;
};

// The same CGAD step as ReferenceWorkload written directly in mpfr_* calls on reused temporaries: the floor
// the reference's overhead is measured against.
class RawMpfrWorkload {
 public:
  explicit RawMpfrWorkload(std::size_t n);
  ~RawMpfrWorkload();
  RawMpfrWorkload(const RawMpfrWorkload&) = delete;
  RawMpfrWorkload& operator=(const RawMpfrWorkload&) = delete;
  void run();
  std::span<const reference::mpfr_real> params() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Seconds per run of `work`: the median of `samples` timings, each of enough runs to last `min_seconds`.
template <class Work>
double measure(Work& work, double min_seconds, int samples = 5);

// `samples` timings of each of two works, taken alternately (a, b, a, b, ...) so that both see the same load on
// a shared machine; seconds per run, in order.
struct PairedTimings {
  std::vector<double> first, second;
};
template <class First, class Second>
PairedTimings measure_alternately(First& first, Second& second, double min_seconds, int samples);

// min, median, max of a sample.
struct Spread {
  double min = 0, median = 0, max = 0;
};
Spread spread(std::vector<double> values);

}  // namespace cgad::bench

#include "cgad/bench/measure_impl.hpp"
